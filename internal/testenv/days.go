package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/store"
)

// PastDays gives the test's day-partitioned tables (callback_log,
// callback_attempt, outbox) a partition for each of the days UTC days
// before today, as if the database had been migrated that long ago: the
// migration's p_old (every day before the test's own, empty in a fresh
// database) is split into p_old and one partition per day. A row is put
// on such a day with UPDATE ... SET retain_day = Day(n).
func (st *TestStore) PastDays(t testing.TB, days int) {
	t.Helper()
	today := Day(0)
	for _, table := range store.DayPartitioned {
		defs := []string{fmt.Sprintf("PARTITION p_old VALUES LESS THAN ('%s')", Day(days).Format(time.DateOnly))}
		for d := Day(days); d.Before(today); d = d.AddDate(0, 0, 1) {
			defs = append(defs, fmt.Sprintf("PARTITION %s VALUES LESS THAN ('%s')", store.DayPartitionName(d), d.AddDate(0, 0, 1).Format(time.DateOnly)))
		}
		_, err := st.SQL.Exec("ALTER TABLE `" + table + "` REORGANIZE PARTITION p_old INTO (" + strings.Join(defs, ", ") + ")")
		require.NoError(t, err, "%s: p_old split into the past days", table)
	}
}

// Day is the UTC day n days before today (n < 0: after), at midnight.
func Day(n int) time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -n)
}
