package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pacer produces the freshness events, keyed by group, at a steady rate.
// Each event's sent_ms and event_time are the wall clock when it is handed
// to the client, so a producer that falls behind, or a full buffer, shows
// in the figures rather than hiding in them.
type pacer struct {
	cl     *kgo.Client
	rng    *rand.Rand
	keys   [][]byte
	lastMs int64
	ts     string // event_time text of lastMs
	failed atomic.Pointer[error]
}

// produceSteady produces rate × duration events to topic, as many each
// millisecond as are due by then, and waits for every ack. It returns the
// events produced and the span from start to the last ack.
func produceSteady(ctx context.Context, c config, topic string, start time.Time) (int64, time.Duration, error) {
	f := c.fresh
	// The buffer bounds what waits for the broker; Produce blocks when full.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(f.linger), kgo.MaxBufferedRecords(1<<16))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	p := &pacer{cl: cl, rng: rand.New(rand.NewPCG(1, 2)), keys: make([][]byte, f.groups)}
	for i := range p.keys {
		p.keys[i] = []byte("g" + strconv.Itoa(i))
	}
	total := int64(float64(f.rate) * f.duration.Seconds())
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var sent int64
	for sent < total && p.failed.Load() == nil {
		due := min(int64(float64(f.rate)*time.Since(start).Seconds()), total)
		for ; sent < due; sent++ {
			p.produce(ctx)
		}
		<-tick.C
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, err
	}
	if e := p.failed.Load(); e != nil {
		return 0, 0, fmt.Errorf("producing: %w", *e)
	}
	return sent, time.Since(start), nil
}

// produce hands one event of a random group to the client.
func (p *pacer) produce(ctx context.Context) {
	now := time.Now()
	ms := now.UnixMilli()
	if ms != p.lastMs {
		p.lastMs, p.ts = ms, now.UTC().Format("2006-01-02 15:04:05.000")
	}
	key := p.keys[p.rng.IntN(len(p.keys))]
	v := make([]byte, 0, 80)
	v = append(v, `{"grp":"`...)
	v = append(v, key...)
	v = append(v, `","sent_ms":`...)
	v = strconv.AppendInt(v, ms, 10)
	v = append(v, `,"event_time":"`...)
	v = append(v, p.ts...)
	v = append(v, `"}`...)
	p.cl.Produce(ctx, &kgo.Record{Key: key, Value: v}, func(_ *kgo.Record, err error) {
		if err != nil {
			p.failed.CompareAndSwap(nil, &err)
		}
	})
}
