package gateway

import (
	"callgate/internal/config"
	"callgate/internal/intake"
)

// deadLetters is the intake's dead-letter budgets: each preset source's
// dead_letters limits (its override, else the section's). A configured
// source stores no dead letters (its body is checked at intake and read
// by its handler), so it has none.
func deadLetters(cfg *config.Config, sources map[string]*intake.Source, stored intake.StoredLookup) *intake.DeadLetters {
	limits := map[string]intake.DeadLetterLimit{}
	for name, s := range sources {
		if s.Platform == nil {
			continue
		}
		n, b := cfg.DeadLetters.For(name)
		limits[name] = intake.DeadLetterLimit{MaxPerHour: n, MaxBytesPerHour: b}
	}
	return intake.NewDeadLetters(limits, stored)
}
