package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/kafka"
)

// A Kafka run runs every query of the script that no other reads (or the
// one --query names), each with the views it reads, side by side in one
// process, as a Kafka Streams application runs its sub-topologies: each
// query is a pipeline of its own, with its own consumer groups, state
// topics and transactions, so one query's commits never wait for
// another's. A view two queries read is computed by each and published by
// each to its own topic (the query's sink topic, a dash and the view's
// name): a view's own CREATE SINK topic can have one writer only, so a
// view two queries of the run read cannot have one. A permanent failure
// of one query stops the others (each ends its open transaction) and
// fails the run.

// kafkaRun is one query of a Kafka run.
type kafkaRun struct {
	q     *planQuery
	eps   *kafkaEndpoints
	pl    *kafka.Pipeline
	sinks []sinkUse // the topics it writes, named as the user gave them
}

// kafkaTargets returns the queries of pqs to run over Kafka, each with
// the views it reads (nil for a run over files): those of pqs that no
// other reads. Every one of them must run over Kafka.
func kafkaTargets(prog *ubik.Program, pqs []*planQuery, kf *kafkaFlags) ([]*planQuery, error) {
	var tops, over, files []*planQuery
	for _, pq := range pqs {
		if !slices.ContainsFunc(pqs, func(o *planQuery) bool { return o != pq && slices.Contains(allViews(o), pq) }) {
			tops = append(tops, pq)
		}
	}
	for _, pq := range tops {
		if kf.wanted(prog, pq) || len(pq.Views()) > 0 && kf.wanted(prog, inputQuery(pq)) {
			over = append(over, pq)
		} else {
			files = append(files, pq)
		}
	}
	if len(over) == 0 {
		return nil, nil
	}
	if len(files) > 0 {
		return nil, fmt.Errorf("%w: query %s runs over Kafka and query %s over files: one run is over Kafka or over files; choose one with --query", ErrUsage, over[0].Name(), files[0].Name())
	}
	for _, pq := range over {
		if err := kafka.CheckPlan(pq); err != nil {
			return nil, queryErr(over, pq, fmt.Errorf("%w: %s", ErrUsage, strings.TrimPrefix(err.Error(), kafka.ErrUnsupported.Error()+": ")))
		}
	}
	return over, nil
}

// kafkaTops returns every query of a script that no other reads, when
// each runs over Kafka and no --query chose one (nil otherwise): a file
// run of several queries needs --output-dir, a Kafka run does not.
func kafkaTops(prog *ubik.Program, kf *kafkaFlags, f *runFlags) []*planQuery {
	if f.query != "" || len(prog.Queries()) < 2 {
		return nil
	}
	qs, err := kafkaTargets(prog, prog.Queries(), kf)
	if err != nil {
		return nil // pickTargets' error says what to do
	}
	return qs
}

// queryErr names q in err when the run has several queries.
func queryErr(qs []*planQuery, q *planQuery, err error) error {
	if len(qs) < 2 {
		return err
	}
	return fmt.Errorf("query %s: %w", q.Name(), err)
}

// checkManyQueries refuses the flags that name one query's topics in a
// run of several: --sink, and --source unless every query's first input
// is the one source it replaces.
func checkManyQueries(k *kafkaFlags, qs []*planQuery) error {
	if len(qs) < 2 {
		return nil
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name()
	}
	if k.sink != "" {
		return fmt.Errorf("%w: --sink is one query's changelog topic, and this run runs queries %s: give each its CREATE SINK ... WITH (connector = 'kafka', topic = '...'), or run one with --query", ErrUsage, strings.Join(names, ", "))
	}
	if k.source == "" {
		return nil
	}
	first := firstInput(qs[0])
	for _, q := range qs[1:] {
		if in := firstInput(q); in.Name() != first.Name() {
			return fmt.Errorf("%w: --source replaces the topic of one source, and query %s reads %s, query %s reads %s: give each CREATE SOURCE its topic, or run one query with --query", ErrUsage, qs[0].Name(), first.Name(), q.Name(), in.Name())
		}
	}
	return nil
}

// distinctSinks refuses two queries of the run that would write one
// topic: two changelogs in one compacted topic overwrite each other's
// keys, and two writers of one view's changelog would each number its
// revisions.
func distinctSinks(runs []*kafkaRun) error {
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			for _, x := range a.sinks {
				for _, y := range b.sinks {
					if x.ep.Topic != y.ep.Topic || !kafka.SameCluster(x.ep.Config, y.ep.Config) {
						continue
					}
					if x.what == y.what {
						return fmt.Errorf("%w: queries %s and %s both read a view whose changelog goes to %s, topic %s: each query computes and publishes the views it reads, and one topic takes one writer; drop that CREATE SINK (each query then publishes the view to its own sink topic, a dash and the view's name), or run one query with --query", ErrUsage, a.q.Name(), b.q.Name(), x.what, x.ep.Topic)
					}
					return fmt.Errorf("%w: %s of query %s and %s of query %s are both topic %s (on %s): two changelogs in one compacted topic overwrite each other's keys; give each its own topic", ErrUsage, x.what, a.q.Name(), y.what, b.q.Name(), x.ep.Topic, x.ep.Config)
				}
			}
		}
	}
	return nil
}

// checkKafkaFlags refuses the flags a Kafka run of qs cannot take.
func checkKafkaFlags(k *kafkaFlags, f *runFlags, qs []*planQuery) error {
	if err := checkRunScope(f.set, true); err != nil {
		return err
	}
	if err := checkCommitInterval(k.commitInterval); err != nil {
		return err
	}
	if k.commitRecords < 0 {
		return fmt.Errorf("%w: --commit-records %d: must be 0 (by time only) or positive", ErrUsage, k.commitRecords)
	}
	if k.giveUpAfter <= 0 {
		return fmt.Errorf("%w: --give-up-after %s: must be positive", ErrUsage, k.giveUpAfter)
	}
	return checkManyQueries(k, qs)
}

// newKafkaRun checks and builds the pipeline of q: its topics, the
// script's other sinks, its options. New checks the options offline: a
// refused run reaches no cluster and opens no file.
func newKafkaRun(env *Env, k *kafkaFlags, f *runFlags, prog *ubik.Program, q *planQuery, run []*planQuery, log *slog.Logger, lvl slog.Level, late *kafkaLate) (*kafkaRun, error) {
	eps, err := kafkaEndpointsOf(env, k, prog, q)
	if err != nil {
		return nil, err
	}
	if err := checkScriptSinks(prog, q, run, eps, k, env); err != nil {
		return nil, err
	}
	opts := kafkaOptions(k, q, eps, log, lvl, late)
	if f.set["join-buffer"] {
		opts.JoinBuffer = f.joinBuffer // per partition of the join
	}
	pl, err := kafka.New(opts)
	if errors.Is(err, kafka.ErrSharedTopic) {
		return nil, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	if err != nil {
		return nil, err
	}
	return &kafkaRun{q: q, eps: eps, pl: pl, sinks: runSinks(prog, q, eps, k)}, nil
}

// runAll runs the pipelines side by side until each ends: at the end of
// its input (--until-caught-up), at a stop (ctx), or at a failure, which
// stops the others and is returned (the first, naming its query when
// there are several).
func runAll(ctx context.Context, log *slog.Logger, runs []*kafkaRun) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	qs := make([]*planQuery, len(runs))
	for i, r := range runs {
		qs[i] = r.q
	}
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan struct{})
			go watchPartitions(log, r.pl, r.eps.src.IdleTimeout, done)
			err := r.pl.Run(rctx)
			close(done)
			if err == nil {
				return
			}
			mu.Lock()
			if first == nil {
				first = queryErr(qs, r.q, err)
			}
			mu.Unlock()
			cancel()
		}()
	}
	wg.Wait()
	return first
}
