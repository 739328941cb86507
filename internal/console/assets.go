package console

import (
	"bytes"
	"callgate/internal/callback"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// web holds the page templates and static assets; no front-end build.
//
//go:embed web/templates/*.html web/static/*
var web embed.FS

// asset is one embedded static file.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

var (
	assets = loadAssets()
	// pageTemplates are the pages, each parsed with the layout.
	pageTemplates = loadTemplates()
)

func loadAssets() map[string]asset {
	out := map[string]asset{}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
	entries, err := fs.ReadDir(web, "web/static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := web.ReadFile("web/static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ct := types[path.Ext(e.Name())]
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		out[e.Name()] = asset{body: b, contentType: ct, etag: hex.EncodeToString(sum[:8])}
	}
	return out
}

// assetURL names a static file with its content hash, so a new build is
// never served from a stale cache.
func assetURL(name string) string {
	a, ok := assets[name]
	if !ok {
		panic("admin: no static asset " + name)
	}
	return "/admin/static/" + name + "?v=" + a.etag
}

// serveStatic serves an embedded asset (no session needed: the login page
// uses them too, and they hold nothing secret).
func serveStatic(c *gin.Context) {
	a, ok := assets[c.Param("file")]
	if !ok {
		c.Data(http.StatusNotFound, "text/plain; charset=utf-8", []byte("not found"))
		return
	}
	hd := c.Writer.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("ETag", `"`+a.etag+`"`)
	if c.Query("v") == a.etag {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(a.body))
}

func loadTemplates() map[string]*template.Template {
	funcs := template.FuncMap{
		"asset":   assetURL,
		"ts":      fmtTime,
		"tsp":     fmtTimePtr,
		"iso":     func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"ago":     ago,
		"age":     fmtAge,
		"str":     deref,
		"trunc":   func(n int, s string) string { return callback.Truncate(s, n) },
		"pct":     func(f float64) string { return fmt.Sprintf("%.0f", math.Floor(f)) },
		"rawjson": prettyJSON,
		"claims":  claimList,
		"statusClass": func(s string) string {
			return "status status-" + strings.ToLower(s)
		},
	}
	out := map[string]*template.Template{}
	pages, err := fs.Glob(web, "web/templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(web, "web/templates/layout.html", p))
	}
	return out
}

const timeLayout = "2006-01-02 15:04:05"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

// ago is a short "how long ago".
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmtAge(time.Since(t).Seconds()) + " ago"
}

// fmtAge renders seconds as 45s, 3m 20s, 2h 5m or 3d 4h.
func fmtAge(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// prettyJSON indents a JSON value ("" for none; the raw text when it is
// not valid JSON).
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
