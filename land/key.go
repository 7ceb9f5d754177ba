package land

import (
	"errors"
	"fmt"
)

// groupKey returns key without the cells at positions: the group of a
// windowed record. Cells are re-joined with ", " as the key contract writes
// them; each kept cell's bytes are copied unchanged.
//
// TODO(lead): switch to changelog.GroupKey once the encoder branch lands.
func groupKey(key []byte, positions []int) ([]byte, error) {
	cells, err := splitKey(key)
	if err != nil {
		return nil, err
	}
	drop := make([]bool, len(cells))
	for _, p := range positions {
		if p < 0 || p >= len(cells) {
			return nil, fmt.Errorf("window position %d outside the key's %d cells", p, len(cells))
		}
		drop[p] = true
	}
	out := make([]byte, 0, len(key))
	out = append(out, '[')
	n := 0
	for i, c := range cells {
		if drop[i] {
			continue
		}
		if n > 0 {
			out = append(out, ',', ' ')
		}
		out = append(out, c...)
		n++
	}
	return append(out, ']'), nil
}

// splitKey returns the raw bytes of each top-level cell of a JSON array.
// It checks the structure (brackets, strings, separators), not the scalars
// themselves: the key's bytes are the engine's contract, not ours to judge.
func splitKey(key []byte) ([][]byte, error) {
	i := skipSpace(key, 0)
	if i >= len(key) || key[i] != '[' {
		return nil, errors.New("key is not a JSON array")
	}
	i = skipSpace(key, i+1)
	var cells [][]byte
	if i < len(key) && key[i] == ']' {
		if skipSpace(key, i+1) != len(key) {
			return nil, fmt.Errorf("bytes after the key array at offset %d", i+1)
		}
		return cells, nil
	}
	for {
		start := i
		end, err := skipValue(key, i)
		if err != nil {
			return nil, err
		}
		if end == start {
			return nil, fmt.Errorf("empty key cell at offset %d", start)
		}
		cells = append(cells, key[start:end])
		i = skipSpace(key, end)
		if i >= len(key) {
			return nil, errors.New("key array is not closed")
		}
		switch key[i] {
		case ',':
			i = skipSpace(key, i+1)
		case ']':
			if skipSpace(key, i+1) != len(key) {
				return nil, fmt.Errorf("bytes after the key array at offset %d", i+1)
			}
			return cells, nil
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d of the key", key[i], i)
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value that starts at i.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, errors.New("key ends inside a cell")
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
		return i, fmt.Errorf("unterminated string at offset %d of the key", i)
	case '[', '{':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipValue(b, j)
				if err != nil {
					return i, err
				}
				j = end - 1
			case '[', '{':
				depth++
			case ']', '}':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return i, fmt.Errorf("unclosed array or object at offset %d of the key", i)
	case ',', ']', '}', ':':
		return i, fmt.Errorf("unexpected %q at offset %d of the key", b[i], i)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j, nil
}
