package land

import "github.com/ubiksql/ubik/changelog"

// groupKey returns key without the cells at positions: the group of a
// windowed record, re-joined with ", " as the key contract writes it. It is
// the one implementation in package changelog (the encoder's own).
func groupKey(key []byte, positions []int) ([]byte, error) {
	return changelog.GroupKey(key, positions)
}

// splitKey returns the raw bytes of each top-level cell of a key array.
func splitKey(key []byte) ([][]byte, error) { return changelog.SplitKey(key) }
