package config

import "callgate/internal/worker"

// WorkerSettings is what the worker process takes from the file.
func (c *Config) WorkerSettings() worker.Settings {
	return worker.Settings{
		Worker:    c.Worker,
		Store:     c.MySQL,
		Broker:    c.AMQP,
		Scheduler: c.Scheduler,
		Replay:    c.Admin.Replay,
		Tracing:   c.Tracing,
		Sources:   c.Sources,
	}
}
