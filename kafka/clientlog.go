package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ClientLogger returns a client option that sends the Kafka client's own
// log (group joins, syncs, leaves, rebalances, retries) at level and
// above to l, under the source "kgo". `ubik run --log-level debug` uses it
// at kgo's info level (its debug level logs every request). The client
// logs no credentials: SASL secrets never reach its log lines.
func ClientLogger(l *slog.Logger, level kgo.LogLevel) kgo.Opt {
	return kgo.WithLogger(&clientLog{l: l.With("source", "kgo"), level: level})
}

type clientLog struct {
	l     *slog.Logger
	level kgo.LogLevel
}

func (c *clientLog) Level() kgo.LogLevel { return c.level }

func (c *clientLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level > c.level || level == kgo.LogLevelNone {
		return
	}
	var sl slog.Level
	switch level {
	case kgo.LogLevelError:
		sl = slog.LevelError
	case kgo.LogLevelWarn:
		sl = slog.LevelWarn
	case kgo.LogLevelInfo:
		sl = slog.LevelInfo
	default:
		sl = slog.LevelDebug
	}
	c.l.Log(context.Background(), sl, msg, keyvals...)
}
