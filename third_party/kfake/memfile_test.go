package kfake

import (
	"bytes"
	"io"
	"math/rand"
	"os"
	"testing"
)

// ubik patch: memFile keeps its bytes in chunks (memChunkSize). Random
// writes, appends, seeks, truncations and reads, across chunk
// boundaries, must behave as one flat byte slice does.
func TestMemFileChunksMatchFlatBytes(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		m := newMemFS()
		af, err := m.OpenFile("/f", os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := m.OpenFile("/f", os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		var ref []byte
		var rpos int64
		size := func(n int) int {
			// Mostly small writes, some larger than a chunk.
			switch rng.Intn(10) {
			case 0:
				return rng.Intn(3 * memChunkSize)
			case 1, 2:
				return rng.Intn(memChunkSize / 2)
			default:
				return rng.Intn(n)
			}
		}
		for op := 0; op < 300; op++ {
			switch rng.Intn(6) {
			case 0, 1: // append
				b := make([]byte, size(5000))
				rng.Read(b)
				if n, err := af.Write(b); err != nil || n != len(b) {
					t.Fatalf("seed %d op %d: append %d: %d, %v", seed, op, len(b), n, err)
				}
				ref = append(ref, b...)
			case 2: // write at a position, possibly past the end
				pos := rng.Int63n(int64(len(ref)) + 2*memChunkSize + 1)
				b := make([]byte, size(5000))
				rng.Read(b)
				if _, err := rf.Seek(pos, io.SeekStart); err != nil {
					t.Fatal(err)
				}
				if _, err := rf.Write(b); err != nil {
					t.Fatal(err)
				}
				if end := pos + int64(len(b)); end > int64(len(ref)) {
					ref = append(ref, make([]byte, end-int64(len(ref)))...)
				}
				copy(ref[pos:], b)
				rpos = pos + int64(len(b))
			case 3: // truncate, shorter or longer
				n := rng.Int63n(int64(len(ref)) + memChunkSize + 1)
				if err := af.Truncate(n); err != nil {
					t.Fatal(err)
				}
				if n < int64(len(ref)) {
					ref = ref[:n]
				} else {
					ref = append(ref, make([]byte, n-int64(len(ref)))...)
				}
			default: // read from a position
				pos := rng.Int63n(int64(len(ref)) + 1)
				if rng.Intn(2) == 0 {
					pos = rpos
				}
				if _, err := rf.Seek(pos, io.SeekStart); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, size(5000))
				n, err := io.ReadFull(rf, b)
				want := ref[min(pos, int64(len(ref))):]
				want = want[:min(len(want), len(b))]
				if n != len(want) || !bytes.Equal(b[:n], want) {
					t.Fatalf("seed %d op %d: read %d at %d of %d: got %d bytes (%v), differing", seed, op, len(b), pos, len(ref), n, err)
				}
				if n < len(b) && err == nil {
					t.Fatalf("seed %d op %d: short read without error", seed, op)
				}
				rpos = pos + int64(n)
			}
			st, err := m.Stat("/f")
			if err != nil || st.Size() != int64(len(ref)) {
				t.Fatalf("seed %d op %d: size %v (%v), want %d", seed, op, st, err, len(ref))
			}
		}
		got, err := m.ReadFile("/f")
		if err != nil || !bytes.Equal(got, ref) {
			t.Fatalf("seed %d: ReadFile differs (%d bytes, want %d, %v)", seed, len(got), len(ref), err)
		}
		// O_TRUNC empties the file; the old bytes read before stay.
		if _, err := m.OpenFile("/f", os.O_TRUNC|os.O_WRONLY, 0o644); err != nil {
			t.Fatal(err)
		}
		if st, _ := m.Stat("/f"); st.Size() != 0 {
			t.Fatalf("seed %d: size %d after O_TRUNC", seed, st.Size())
		}
		if !bytes.Equal(got, ref) {
			t.Fatalf("seed %d: a ReadFile copy changed after O_TRUNC", seed)
		}
	}
}

// BenchmarkMemFileAppend appends 16 KiB batches to a segment until it
// holds 64 MiB, as a produce-heavy load does to the broker's in-memory
// store.
func BenchmarkMemFileAppend(b *testing.B) {
	batch := make([]byte, 16<<10)
	b.SetBytes(64 << 20)
	for b.Loop() {
		m := newMemFS()
		f, err := m.OpenFile("/seg", os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		for range (64 << 20) / len(batch) {
			if _, err := f.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
	}
}
