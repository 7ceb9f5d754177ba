package ubik

import (
	"fmt"
	"log/slog"
	"time"
)

// Options configure an Engine. The zero value is not valid; start from
// DefaultOptions. Open copies the struct, so later changes by the caller do
// not affect the engine.
type Options struct {
	// Logger receives diagnostics. Default: a logger that discards.
	Logger *slog.Logger
	// Now is the processing-time clock, used for EMIT EARLY intervals and
	// emission latency. Default: time.Now.
	Now func() time.Time
	// MaxPendingRecords bounds the records a Query without an OnRecord
	// callback holds for Next: at no time are more rendered, whatever one
	// call finalizes (the rest wait as queued windows, and Next renders them
	// as it takes records). Push returns ErrBackpressure, applying nothing,
	// while the buffer is full or such work waits; take records with Next
	// and push again. Default: 65536.
	MaxPendingRecords int
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Logger:            slog.New(slog.DiscardHandler),
		Now:               time.Now,
		MaxPendingRecords: 65536,
	}
}

func (o *Options) validate() error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxPendingRecords == 0 {
		o.MaxPendingRecords = 65536
	}
	if o.MaxPendingRecords < 1 {
		return fmt.Errorf("%w: MaxPendingRecords must be positive, got %d", ErrInvalidOptions, o.MaxPendingRecords)
	}
	return nil
}
