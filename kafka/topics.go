package kafka

import (
	"fmt"
	"strings"
)

// One topic, one use. A run's topics are its inputs (the source, a second
// source, a table or right stream) and its sinks (the query's and each
// view's); ubik owns the internal topics of its stages, named after the
// query (Owned, segmentOwned): it creates them, writes its own records to
// them and deletes them at ResetState. Two uses that are one topic break
// the run: two changelogs would interleave in one compacted topic, each
// overwriting the other's keys; a sink that is an input feeds the query
// its own output; a user's topic that is an internal one mixes ubik's
// records with the user's, and a reset deletes it. New refuses all of
// these before anything is read or written, naming both uses (ksqlDB
// likewise refuses a sink topic that is its source).

// topicUse is one topic of a run: what uses it, and where.
type topicUse struct {
	what   string
	sink   bool
	topic  string
	config Config
}

// topicUses lists the topics of the run p: its inputs, in the order its
// plan decodes them, then its sinks.
func (p *Pipeline) topicUses() []topicUse {
	o := p.opts
	if p.vj != nil {
		o = p.vj.opts // the join stage's own are its segment's source
	}
	streams, tables := inputsOf(p.q)
	var uses []topicUse
	for i, s := range streams {
		ep := o.Source
		if i > 0 {
			ep = o.JoinSource
			if ep.Topic == "" {
				ep = o.Table // an interval join's right stream
			}
		}
		uses = append(uses, topicUse{"source " + s.Name + "'s topic", false, ep.Topic, ep.Config})
	}
	for _, t := range tables {
		uses = append(uses, topicUse{"table " + t.Name + "'s topic", false, o.Table.Topic, o.Table.Config})
	}
	uses = append(uses, topicUse{"query " + p.q.Name + "'s sink", true, o.Sink.Topic, o.Sink.Config})
	for _, v := range allViewsOf(p.q) {
		if vs, ok := o.ViewSinks[v.Name]; ok {
			uses = append(uses, topicUse{"view " + v.Name + "'s sink", true, vs.Topic, vs.Config})
		}
	}
	return uses
}

// ownerOf returns the name under which p, or a side of a join of two
// views it runs, owns topic (its repartition or state topic, or a view
// repartition's of any segment, which ResetState deletes), or "".
func (p *Pipeline) ownerOf(topic string) string {
	for _, suffix := range []string{"-repartition", "-state"} {
		if n, ok := strings.CutSuffix(topic, suffix); ok && (n == p.name || n == dedupName(p.name) || isSegmentName(p.name, n)) {
			return p.name
		}
	}
	if p.vj != nil {
		for _, s := range p.vj.sides {
			if n := s.p.ownerOf(topic); n != "" {
				return n
			}
		}
	}
	return ""
}

// checkTopics refuses a run two of whose uses are one topic on one
// cluster, or one of whose topics ubik owns (see the comment at the top).
func (p *Pipeline) checkTopics() error {
	uses := p.topicUses()
	for i, a := range uses {
		if n := p.ownerOf(a.topic); n != "" {
			return fmt.Errorf("%w: %s is topic %s, an internal topic of %s: ubik writes its own records there and --reset-state (Options.ResetState) deletes it; give it another topic, or the query another name",
				ErrSharedTopic, a.what, a.topic, n)
		}
		for _, b := range uses[:i] {
			if a.topic == b.topic && sameCluster(a.config, b.config) {
				return sharedTopic(b, a)
			}
		}
	}
	return nil
}

// sharedTopic says why two uses of one topic are refused and what to do.
func sharedTopic(a, b topicUse) error {
	why := "a run reads each input from a topic of its own"
	switch {
	case a.sink && b.sink:
		why = "two changelogs in one compacted topic would overwrite each other's keys; give each sink a topic of its own"
	case a.sink || b.sink:
		why = "the query would read its own output; give the sink a topic of its own"
	}
	return fmt.Errorf("%w: %s and %s are both topic %s (on %s): %s", ErrSharedTopic, a.what, b.what, a.topic, a.config, why)
}
