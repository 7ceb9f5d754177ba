// Command e2etool is the helper of the end-to-end scripts in test/e2e for
// what the ubik commands do not do themselves: reading a changelog topic
// the way a read_committed consumer sees it, loading the Redis lander's
// function without landing anything, and deleting what a run created.
//
//	e2etool ping BROKERS                   fails unless a broker answers a metadata request
//	e2etool count BROKERS TOPIC            records visible to read_committed now
//	e2etool dump BROKERS TOPIC             one line per record, in offset order:
//	                                       key TAB value TAB final TAB revision TAB window_start
//	e2etool wait-landed BROKERS TOPIC GROUP
//	                                       waits (60s at most) until GROUP's committed offsets
//	                                       are past the last record of every partition of TOPIC
//	e2etool redis-function ADDR            loads the lander's Redis function (redislander.New)
//	e2etool delete BROKERS TOPICS GROUPS   comma-separated topics and consumer groups
//
// BROKERS is host:port[,host:port]. Every failure exits 1 with a message.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/redislander"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2etool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: e2etool count|dump|redis-function|delete ...")
	}
	need := func(n int) error {
		if len(args)-1 != n {
			return fmt.Errorf("%s takes %d arguments, got %d", args[0], n, len(args)-1)
		}
		return nil
	}
	switch args[0] {
	case "ping":
		if err := need(1); err != nil {
			return err
		}
		cl, err := newClient(args[1])
		if err != nil {
			return err
		}
		defer cl.Close()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).BrokerMetadata(pctx); err != nil {
			return fmt.Errorf("no Kafka broker answers at %s (set UBIK_KAFKA_BROKERS; scripts/services.sh up kafka starts one): %w", args[1], err)
		}
		return nil
	case "count":
		if err := need(2); err != nil {
			return err
		}
		n := 0
		err := readTopic(ctx, args[1], args[2], func(*kgo.Record) error { n++; return nil })
		fmt.Println(n)
		return err
	case "dump":
		if err := need(2); err != nil {
			return err
		}
		w := os.Stdout
		return readTopic(ctx, args[1], args[2], func(r *kgo.Record) error {
			rec, err := kafkasrc.Decode(r)
			if err != nil {
				return fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
			}
			final := "0"
			if rec.Meta.Final {
				final = "1"
			}
			_, err = fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", rec.Key, rec.Value, final, rec.Meta.Revision, rec.Meta.WindowStart)
			return err
		})
	case "wait-landed":
		if err := need(3); err != nil {
			return err
		}
		return waitLanded(ctx, args[1], args[2], args[3])
	case "redis-function":
		if err := need(1); err != nil {
			return err
		}
		c := redis.NewClient(&redis.Options{Addr: args[1]})
		defer c.Close()
		l, err := redislander.New(ctx, redislander.Options{Client: c, Mode: land.Latest})
		if err != nil {
			return err
		}
		return l.Close()
	case "delete":
		if err := need(3); err != nil {
			return err
		}
		return deleteAll(ctx, args[1], split(args[2]), split(args[3]))
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func split(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(split(brokers)...)}, opts...)...)
}

// readTopic calls fn for every record of topic up to its last stable
// offsets as of now, as a read_committed consumer sees them, partition by
// partition in offset order.
func readTopic(ctx context.Context, brokers, topic string, fn func(*kgo.Record) error) error {
	cl, err := newClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	if ends.Error() != nil {
		return fmt.Errorf("topic %s: %w", topic, ends.Error())
	}
	from := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	var parts []int32
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Offset > s.Offset {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
			end[o.Partition] = o.Offset
			parts = append(parts, o.Partition)
		}
	})
	if len(parts) == 0 {
		return nil
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	rc, err := newClient(brokers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer rc.Close()
	byPart := map[int32][]*kgo.Record{}
	pending := len(parts)
	for pending > 0 {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("reading %s: %w", topic, ctx.Err())
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			e := end[r.Partition]
			if r.Offset >= e {
				return
			}
			if !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			if r.Offset+1 == e {
				pending--
			}
		})
	}
	for _, p := range parts {
		for _, r := range byPart[p] {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitLanded waits until group has committed, on every partition of topic,
// an offset past the partition's last data record. That is the end a
// consumer of a transactional topic can commit: the topic ends with a
// commit marker, a control record no consumer is handed, so a committed
// offset stays one below the partition's end offset.
func waitLanded(ctx context.Context, brokers, topic, group string) error {
	want := map[int32]int64{}
	if err := readTopic(ctx, brokers, topic, func(r *kgo.Record) error {
		want[r.Partition] = r.Offset + 1
		return nil
	}); err != nil {
		return err
	}
	if len(want) == 0 {
		return fmt.Errorf("topic %s holds no records", topic)
	}
	cl, err := newClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	for {
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return fmt.Errorf("offsets of group %s: %w", group, err)
		}
		behind := 0
		for p, w := range want {
			if c, ok := committed.Lookup(topic, p); !ok || c.Err != nil || c.At < w {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s has not committed past the last record of %d partition(s) of %s after 60s", group, behind, topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteAll deletes topics and consumer groups; missing ones are fine.
func deleteAll(ctx context.Context, brokers string, topics, groups []string) error {
	cl, err := newClient(brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var errs []error
	if len(groups) > 0 {
		resp, err := adm.DeleteGroups(ctx, groups...)
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting groups: %w", err))
		}
		for g, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
				errs = append(errs, fmt.Errorf("deleting group %s: %w", g, r.Err))
			}
		}
	}
	if len(topics) > 0 {
		resp, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting topics: %w", err))
		}
		for t, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("deleting topic %s: %w", t, r.Err))
			}
		}
	}
	return errors.Join(errs...)
}
