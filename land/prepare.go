package land

import (
	"fmt"
	"strings"

	"github.com/ubiksql/ubik/changelog"
)

// QuerySeparator separates the query name from the rest of a store key in
// the stores whose keys are strings (Redis, DynamoDB); a query name may not
// contain it.
const QuerySeparator = ":"

// Prepare validates rec under mode and returns its store item. The item's
// byte slices alias rec's. query, when not empty, is the namespace for
// records that carry no query name; a record naming another query is an
// error, since it would land in the wrong namespace.
func Prepare(mode Mode, query string, rec changelog.Record) (Item, error) {
	m := rec.Meta
	q := m.Query
	if q == "" {
		q = query
	} else if query != "" && q != query {
		return Item{}, fmt.Errorf("%w: record of query %q, lander namespace %q", ErrBadRecord, q, query)
	}
	if q == "" {
		return Item{}, fmt.Errorf("%w: no query name (the store keys are namespaced by it)", ErrBadRecord)
	}
	if strings.Contains(q, QuerySeparator) {
		return Item{}, fmt.Errorf("%w: query name %q contains %q", ErrBadRecord, q, QuerySeparator)
	}
	if rec.Value == nil {
		return Item{}, fmt.Errorf("%w: null value (ubik never emits a tombstone)", ErrBadRecord)
	}
	if len(rec.Key) == 0 {
		return Item{}, fmt.Errorf("%w: empty key", ErrBadRecord)
	}
	if m.Revision == 0 {
		return Item{}, fmt.Errorf("%w: revision 0 (revisions count from 1)", ErrBadRecord)
	}
	it := Item{Key: rec.Key, Value: rec.Value, Final: m.Final}
	it.Query = q
	it.Version.Revision = m.Revision
	switch {
	case mode == Continuous && m.Windowed:
		return Item{}, fmt.Errorf("%w: windowed record in continuous mode (use latest or history)", ErrModeMismatch)
	case mode.Windowed() && !m.Windowed:
		return Item{}, fmt.Errorf("%w: unwindowed record in %s mode (use continuous)", ErrModeMismatch, mode)
	case !mode.Valid():
		return Item{}, fmt.Errorf("land: invalid mode %v", mode)
	}
	if mode == Continuous {
		if _, err := splitKey(rec.Key); err != nil {
			return Item{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
		}
		it.Group = rec.Key
		return it, nil
	}
	if len(m.WindowPositions) == 0 {
		return Item{}, fmt.Errorf("%w: windowed record without window positions", ErrBadRecord)
	}
	if m.WindowEnd < m.WindowStart {
		return Item{}, fmt.Errorf("%w: window end %d before its start %d", ErrBadRecord, m.WindowEnd, m.WindowStart)
	}
	g, err := groupKey(rec.Key, m.WindowPositions)
	if err != nil {
		return Item{}, fmt.Errorf("%w: %v", ErrBadRecord, err)
	}
	it.Group = g
	it.Version.WindowStart = m.WindowStart
	it.WindowEnd = m.WindowEnd
	if mode == History {
		it.WindowStart = m.WindowStart
	}
	return it, nil
}

// PrepareBatch prepares recs and keeps, per identity, only the item with the
// highest version: one store statement may not touch a row twice, and the
// dropped items would lose to it anyway. The dropped items are counted in
// the returned Result (Duplicate when equal to the kept one, Superseded when
// lower). The kept items stay in first-seen order. Bad records fail the
// batch with RecordErrors naming every one of them.
func PrepareBatch(mode Mode, query string, recs []changelog.Record) ([]Item, Result, error) {
	return PrepareChecked(mode, query, recs, nil)
}

// PrepareChecked is PrepareBatch with a store's own check of each item
// (its limits: sizes, bytes it cannot hold), run before anything is sent.
// check's error should wrap ErrRefused and name the limit.
func PrepareChecked(mode Mode, query string, recs []changelog.Record, check func(Item) error) ([]Item, Result, error) {
	items := make([]Item, 0, len(recs))
	seen := make(map[identity]int, len(recs))
	var res Result
	var bad RecordErrors
	for i, r := range recs {
		it, err := Prepare(mode, query, r)
		if err == nil && check != nil {
			err = check(it)
		}
		if err != nil {
			bad = append(bad, &RecordError{Index: i, Err: err})
			continue
		}
		id := identity{it.Query, string(it.Group), it.WindowStart}
		j, dup := seen[id]
		if !dup {
			seen[id] = len(items)
			items = append(items, it)
			continue
		}
		switch it.Version.Compare(items[j].Version) {
		case 1:
			res.Superseded++
			items[j] = it
		case 0:
			res.Duplicate++
		default:
			res.Superseded++
		}
	}
	if bad != nil {
		return nil, Result{}, bad
	}
	return items, res, nil
}

type identity struct {
	query string
	group string
	ws    int64
}

// RefOf returns the Ref that rec lands under in mode.
func RefOf(mode Mode, query string, rec changelog.Record) (Ref, error) {
	it, err := Prepare(mode, query, rec)
	if err != nil {
		return Ref{}, err
	}
	return it.Ref, nil
}
