// Package landtest is the conformance suite every lander runs (Run), plus
// the record generators and the oracle it checks against.
//
// The suite needs real stores: a Harness opens landers over an isolated
// namespace that the suite names, so that its subtests and other packages'
// tests can share one server.
package landtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// Memory is an in-memory lander that applies the land rules exactly: the
// suite's oracle, and a lander for tests of code that drives landers.
type Memory struct {
	mode  land.Mode
	query string
	mu    sync.Mutex
	m     map[memKey]land.Stored
}

type memKey struct {
	query, group string
	ws           int64
}

func (m *Memory) refKey(r land.Ref) memKey {
	if m.mode != land.History {
		r.WindowStart = 0 // ignored outside History, as in every lander
	}
	return memKey{r.Query, string(r.Group), r.WindowStart}
}

// NewMemory returns an empty Memory lander.
func NewMemory(mode land.Mode, query string) *Memory {
	return &Memory{mode: mode, query: query, m: map[memKey]land.Stored{}}
}

// Mode implements land.Lander.
func (m *Memory) Mode() land.Mode { return m.mode }

// Land implements land.Lander.
func (m *Memory) Land(_ context.Context, recs []changelog.Record) (land.Result, error) {
	items, res, err := land.PrepareBatch(m.mode, m.query, recs)
	if err != nil {
		return land.Result{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, it := range items {
		k := m.refKey(it.Ref)
		cur, ok := m.m[k]
		c := 1
		if ok {
			c = it.Version.Compare(cur.Version)
		}
		switch {
		case c > 0:
			m.m[k] = land.Stored{
				Key: append([]byte(nil), it.Key...), Value: append([]byte(nil), it.Value...),
				Version: it.Version, WindowEnd: it.WindowEnd, Final: it.Final,
			}
			res.Landed++
		case c == 0:
			res.Duplicate++
		default:
			res.Superseded++
		}
	}
	return res, nil
}

// Get implements land.Lander.
func (m *Memory) Get(_ context.Context, ref land.Ref) (land.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[m.refKey(ref)]
	if !ok {
		return land.Stored{}, fmt.Errorf("%w: %v", land.ErrNotFound, ref)
	}
	return s, nil
}

// Refs returns every stored identity.
func (m *Memory) Refs() []land.Ref {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]land.Ref, 0, len(m.m))
	for k := range m.m {
		out = append(out, land.Ref{Query: k.query, Group: []byte(k.group), WindowStart: k.ws})
	}
	return out
}

// Close implements land.Lander.
func (m *Memory) Close() error { return nil }
