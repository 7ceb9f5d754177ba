package exec

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// Checks of restored join state: a checkpoint entry with a valid CRC may
// still be crafted, and a join must refuse what it would never have
// written rather than hold a state of other results (or panic on it
// later).

// checkRow reports a restored row's cell that is not a value of its
// column: another kind, a decimal of another scale, a NULL time.
func checkRow(row []types.Value, src *plan.Source) error {
	for i, c := range src.Columns {
		v := row[i]
		if v.Kind != c.Type.Kind || c.Type.Kind == types.KindDecimal && v.Scale != c.Type.Scale {
			return fmt.Errorf("column %s holds a %s value, not a %s one", c.Name, v.Kind, c.Type.Kind)
		}
	}
	if src.TimeCol >= 0 && row[src.TimeCol].Null {
		return fmt.Errorf("the time column %s is NULL", src.Columns[src.TimeCol].Name)
	}
	return nil
}

// checkCounts reports a negative count among a restored entry's counters.
func checkCounts(names string, xs ...int64) error {
	for _, x := range xs {
		if x < 0 {
			return fmt.Errorf("a negative count (%s)", names)
		}
	}
	return nil
}

// restoredKeys records the entry keys a restore of incremental entries
// has loaded: a store keeps one value per key, so a key met twice was
// not written by a join.
type restoredKeys map[string]struct{}

func (s *restoredKeys) add(key []byte) bool {
	if *s == nil {
		*s = restoredKeys{}
	}
	if _, ok := (*s)[string(key)]; ok {
		return false
	}
	(*s)[string(key)] = struct{}{}
	return true
}

// validJoinKey reports whether k is a join key appendJoinKey can produce
// for cells of exprs' types: no NULL cell (a row with one is never held),
// a NaN or infinite double as its own tag, any other cell as a group key
// cell.
func validJoinKey(k []byte, exprs []plan.Expr) bool {
	i := 0
	for _, e := range exprs {
		t := e.Type()
		if i >= len(k) || k[i] == 0 {
			return false
		}
		if t.Kind == types.KindDouble && k[i] == 0xfe {
			if i+1 >= len(k) || k[i+1] != 'n' && k[i+1] != '+' && k[i+1] != '-' {
				return false
			}
			i += 2
			continue
		}
		n, ok := groupCellLen(k[i:], t)
		if !ok {
			return false
		}
		i += n
	}
	return i == len(k)
}
