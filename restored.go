package ubik

import (
	"fmt"

	"github.com/ubiksql/ubik/internal/drive"
)

// restoredEntries checks what a restore loads as a whole: a host's store
// keeps one value per key, and every checkpoint writes the meta entry
// (watermarks, counters, position), so a key met twice, or entries
// without the meta entry, are not a checkpoint the engine wrote.
type restoredEntries struct {
	keys map[string]bool // true: a value, false: a delete (an empty value)
	meta bool
}

func (r *restoredEntries) add(key, val []byte, metaKey []byte) error {
	if r.keys == nil {
		r.keys = map[string]bool{}
	}
	if _, ok := r.keys[string(key)]; ok {
		return fmt.Errorf("%w: entry %q restored twice: a checkpoint holds one value per key (restore the latest value of each)", drive.ErrBadState, key)
	}
	r.keys[string(key)] = len(val) > 0
	if string(key) == string(metaKey) && len(val) > 0 {
		r.meta = true
	}
	return nil
}

func (r *restoredEntries) finish() error {
	n := 0
	for _, v := range r.keys {
		if v {
			n++
		}
	}
	if n > 0 && !r.meta {
		return fmt.Errorf("%w: the checkpoint holds %d entries but no meta entry (watermarks, counters, position), which every checkpoint writes", drive.ErrBadState, n)
	}
	r.keys, r.meta = nil, false
	return nil
}
