//go:build fault

package main

import (
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"

	"callgate/internal/worker"
)

// faultHooks reads the fault-injection switches the fault tests use to kill
// this process at the worst moments. Unset (always, in production) they do
// nothing:
//
//	CALLGATE_FAULT_KILL_AFTER_COMMIT=N  SIGKILL right after the N-th commit,
//	                                    before the outbox publish and the ack
//	CALLGATE_FAULT_KILL_BEFORE_ACK=N    SIGKILL after the N-th callback's
//	                                    outbox publish, before its ack
func faultHooks(log *slog.Logger) worker.Hooks {
	killAfter := func(env string) func(int64) {
		n, err := strconv.Atoi(os.Getenv(env))
		if err != nil || n <= 0 {
			return nil
		}
		var count atomic.Int64
		return func(logID int64) {
			if count.Add(1) == int64(n) {
				log.Warn("worker: fault injection, killing myself", "switch", env, "log_id", logID)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	return worker.Hooks{
		AfterCommit: killAfter("CALLGATE_FAULT_KILL_AFTER_COMMIT"),
		BeforeAck:   killAfter("CALLGATE_FAULT_KILL_BEFORE_ACK"),
	}
}
