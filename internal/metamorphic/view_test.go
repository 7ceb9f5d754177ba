package metamorphic

import (
	"math/rand/v2"
	"testing"
)

// TestViewInProcess runs view cases (GenerateView) through every
// in-process configuration: batch sizes, output bounds, checkpoints and
// restores of the whole graph.
func TestViewInProcess(t *testing.T) {
	for seed := uint64(300); seed < 310; seed++ {
		c := GenerateView(seed, Size{Events: shortEvents})
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d: %d finals of\n%s", seed, len(want), c.SQL)
		if len(want) == 0 {
			t.Errorf("seed %d: no final records", seed)
		}
	}
}

// TestViewPaths runs two view cases through the C ABI, Python,
// `ubik run --state-dir` under kill -9 and Kafka (the graph in each
// partition, repartitioned and direct, kill -9 and restart: the case's
// query groups by the view's GROUP BY cells, so it follows the view's
// partitioning).
func TestViewPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	for i, seed := range []uint64{201, 202} {
		kr := []kafkaRun{{partitions: 3}, {partitions: 4, direct: true}}[i]
		one(t, tl, GenerateView(seed, Size{Events: shortEvents}), paths{capi: true, python: true, file: true, short: true, kafka: []kafkaRun{kr}})
	}
}

// TestIntervalJoinInProcess runs interval-join cases
// (GenerateIntervalJoin) through every in-process configuration: batch
// sizes, output bounds, checkpoints and restores of the whole graph.
func TestIntervalJoinInProcess(t *testing.T) {
	for seed := uint64(400); seed < 410; seed++ {
		c := GenerateIntervalJoin(seed, Size{Events: shortEvents})
		_, want, fs := runInProcessPaths(c, rand.New(rand.NewPCG(seed, 3)))
		report(t, c, fs)
		t.Logf("seed %d: %d finals of\n%s", seed, len(want), c.SQL)
		if len(want) == 0 {
			t.Errorf("seed %d: no final records", seed)
		}
	}
}

// TestIntervalJoinPaths runs two interval-join cases through the C ABI,
// Python and `ubik run --state-dir` under kill -9.
func TestIntervalJoinPaths(t *testing.T) {
	tl := build(t, t.TempDir())
	for _, seed := range []uint64{211, 212} {
		one(t, tl, GenerateIntervalJoin(seed, Size{Events: shortEvents}), paths{capi: true, python: true, file: true, short: true})
	}
}
