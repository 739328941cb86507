package console

import (
	"callgate/internal/admin"
	"fmt"
	"math"
)

// chart is the dashboard's per-minute bar chart of intake and failures,
// drawn by the template as an inline <svg> (no script, no library).
type chart struct {
	Width, Height float64
	// Plot area.
	Left, Top, Right, Bottom float64
	PlotH                    float64
	Bars                     []chartBar
	// Ticks are the horizontal grid lines with their labels.
	Ticks []chartTick
	// XLabels are the time labels under the plot.
	XLabels  []chartLabel
	Received int64
	Failed   int64
	Empty    bool
	Summary  string
}

type chartBar struct {
	// X and W are the minute's slot (the hover target).
	X, W float64
	// RX, FX and BW place the received and the failed bar in it.
	RX, FX, BW float64
	RY, RH     float64
	FY, FH     float64
	Title      string
}

type chartTick struct {
	Y     float64
	Label string
}

type chartLabel struct {
	X      float64
	Label  string
	Anchor string
}

// newChart lays the series out on a fixed 900x200 canvas.
func newChart(series []admin.Point) chart {
	c := chart{Width: 900, Height: 200, Left: 44, Top: 10, Right: 890, Bottom: 170}
	var peak int64
	for _, p := range series {
		peak = max(peak, p.Received, p.Failed)
		c.Received += p.Received
		c.Failed += p.Failed
	}
	c.Empty = peak == 0
	top := niceCeil(peak)
	plotH := c.Bottom - c.Top
	c.PlotH = plotH
	n := max(len(series), 1)
	slot := (c.Right - c.Left) / float64(n)
	y := func(v int64) float64 { return c.Bottom - float64(v)/float64(top)*plotH }
	for i, p := range series {
		// Two bars side by side in each minute's slot: received, failed.
		x := c.Left + float64(i)*slot
		b := chartBar{X: round1(x), W: round1(slot), RX: round1(x + slot*0.1), FX: round1(x + slot*0.5), BW: round1(slot * 0.4)}
		b.RY, b.RH = round1(y(p.Received)), round1(c.Bottom-y(p.Received))
		b.FY, b.FH = round1(y(p.Failed)), round1(c.Bottom-y(p.Failed))
		b.Title = fmt.Sprintf("%s UTC: %d received, %d failed", p.Minute.UTC().Format("15:04"), p.Received, p.Failed)
		c.Bars = append(c.Bars, b)
	}
	for _, v := range []int64{0, top / 2, top} {
		if v == 0 && top/2 == 0 {
			continue
		}
		c.Ticks = append(c.Ticks, chartTick{Y: round1(y(v)), Label: fmt.Sprint(v)})
	}
	if len(series) > 0 {
		first, last := series[0].Minute.UTC(), series[len(series)-1].Minute.UTC()
		mid := series[len(series)/2].Minute.UTC()
		c.XLabels = []chartLabel{
			{X: c.Left, Label: first.Format("15:04"), Anchor: "start"},
			{X: round1((c.Left + c.Right) / 2), Label: mid.Format("15:04"), Anchor: "middle"},
			{X: c.Right, Label: last.Format("15:04") + " UTC", Anchor: "end"},
		}
	}
	c.Summary = fmt.Sprintf("Last %d minutes: %d callbacks received, %d failed.", len(series), c.Received, c.Failed)
	return c
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 2, so
// the half-way tick is a whole number).
func niceCeil(v int64) int64 {
	if v <= 2 {
		return 2
	}
	mag := int64(math.Pow(10, math.Floor(math.Log10(float64(v)))))
	for _, m := range []int64{1, 2, 5, 10} {
		if m*mag >= v {
			return m * mag
		}
	}
	return 10 * mag
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
