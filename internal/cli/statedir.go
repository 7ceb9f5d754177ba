package cli

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/ubiksql/ubik"
)

// A file run with --state-dir checkpoints, atomically and together, the
// operator state, the input position and the length of every output file.
// After a crash (kill -9 included) the same command resumes: outputs are cut
// back to the checkpointed lengths, the input is read from the checkpointed
// offset, and the state is restored, so the final changelog equals an
// uninterrupted run's: revisions continue and no window is finalized twice.
//
// The checkpoint is one file, replaced by write-to-temp, fsync, rename,
// fsync of the directory; a crash at any point leaves the previous
// checkpoint or the new one, never a torn one (a CRC guards the content).

const ckptMagic = "UBIKCKP1"

// ckptMagic2 marks a checkpoint whose header also holds the lengths of
// the further changelog outputs of a graph of views (ckptHeader.Extra).
const ckptMagic2 = "UBIKCKP2"

// ckptMagic3 marks a checkpoint whose header holds, after the lengths of
// ckptMagic2, the position in an interval join's right input.
const ckptMagic3 = "UBIKCKP3"

type ckptHeader struct {
	Finished    bool
	InputOffset int64
	Line        int64
	Outputs     [3]int64 // changelog, dead letters, late events
	Extra       []int64  // the changelogs of the other queries of a graph of views, in target order
	// Right: an interval join's right input, read to RightOffset (bytes)
	// and RightLine.
	Right                  bool
	RightOffset, RightLine int64
}

type checkpointFile struct {
	dir      string
	identity [32]byte // hash of the SQL text, query name and input path
	lock     *os.File // the state dir's lock, held until close
}

// newCheckpointFile opens state dir dir (made 0700 if new, so the state
// is the user's alone), taking its lock for the run: close releases it.
func newCheckpointFile(dir, sql, query, input string) (*checkpointFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := lockStateDir(dir)
	if err != nil {
		return nil, err
	}
	// Temporaries of a run that crashed before its rename.
	if old, err := filepath.Glob(filepath.Join(dir, ckptTempPattern)); err == nil {
		for _, p := range old {
			os.Remove(p)
		}
	}
	h := sha256.New()
	for _, s := range []string{sql, query, input} {
		binary.Write(h, binary.LittleEndian, uint64(len(s)))
		h.Write([]byte(s))
	}
	c := &checkpointFile{dir: dir, lock: lock}
	copy(c.identity[:], h.Sum(nil))
	return c, nil
}

// close releases the state dir's lock.
func (c *checkpointFile) close() error { return c.lock.Close() }

// ckptTempPattern names a checkpoint being written: a fresh name made
// with O_EXCL (os.CreateTemp), so that a file or symlink already in the
// dir is never opened, let alone written through.
const ckptTempPattern = "checkpoint-*.tmp"

func (c *checkpointFile) path() string { return filepath.Join(c.dir, "checkpoint") }

// save writes a full checkpoint of q with header h.
func (c *checkpointFile) save(q *ubik.Query, h ckptHeader) error {
	var b bytes.Buffer
	if h.Right {
		b.WriteString(ckptMagic3)
	} else if h.Extra != nil {
		b.WriteString(ckptMagic2)
	} else {
		b.WriteString(ckptMagic)
	}
	b.Write(c.identity[:])
	var num []byte
	if h.Finished {
		num = append(num, 1)
	} else {
		num = append(num, 0)
	}
	for _, v := range []int64{h.InputOffset, h.Line, h.Outputs[0], h.Outputs[1], h.Outputs[2]} {
		num = binary.AppendVarint(num, v)
	}
	if h.Extra != nil || h.Right {
		num = binary.AppendUvarint(num, uint64(len(h.Extra)))
		for _, v := range h.Extra {
			num = binary.AppendVarint(num, v)
		}
	}
	if h.Right {
		num = binary.AppendVarint(num, h.RightOffset)
		num = binary.AppendVarint(num, h.RightLine)
	}
	b.Write(num)
	err := q.Checkpoint(true, nil, func(key, val []byte) error {
		var l []byte
		l = binary.AppendUvarint(l, uint64(len(key)))
		l = binary.AppendUvarint(l, uint64(len(val)))
		b.Write(l)
		b.Write(key)
		b.Write(val)
		return nil
	})
	if err != nil {
		return err
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(b.Bytes())))
	if err := c.replace(b.Bytes()); err != nil {
		return err
	}
	return syncDir(c.dir)
}

// replace writes data to a new temporary file (mode 0600) and renames it
// over the checkpoint.
func (c *checkpointFile) replace(data []byte) error {
	f, err := os.CreateTemp(c.dir, ckptTempPattern)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path())
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// load restores q from the checkpoint, if there is one; it returns nil when
// the state dir holds none.
func (c *checkpointFile) load(q *ubik.Query) (*ckptHeader, error) {
	data, err := os.ReadFile(c.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bad := func(what string) error {
		return fmt.Errorf("ubik: checkpoint %s is corrupt (%s); remove the state dir to start over", c.path(), what)
	}
	if len(data) < len(ckptMagic)+32+4 || string(data[:len(ckptMagic)]) != ckptMagic && string(data[:len(ckptMagic)]) != ckptMagic2 && string(data[:len(ckptMagic)]) != ckptMagic3 {
		return nil, bad("no header")
	}
	v3 := string(data[:len(ckptMagic)]) == ckptMagic3
	v2 := v3 || string(data[:len(ckptMagic)]) == ckptMagic2
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, bad("checksum mismatch")
	}
	if !bytes.Equal(body[len(ckptMagic):len(ckptMagic)+32], c.identity[:]) {
		return nil, fmt.Errorf("%w: %s; use another --state-dir, or remove it to start over", ErrStateMismatch, c.dir)
	}
	r := bufio.NewReader(bytes.NewReader(body[len(ckptMagic)+32:]))
	var h ckptHeader
	fin, err := r.ReadByte()
	if err != nil {
		return nil, bad("header")
	}
	if fin > 1 {
		return nil, bad("header")
	}
	h.Finished = fin == 1
	for _, p := range []*int64{&h.InputOffset, &h.Line, &h.Outputs[0], &h.Outputs[1], &h.Outputs[2]} {
		if *p, err = binary.ReadVarint(r); err != nil {
			return nil, bad("header")
		}
	}
	if v2 {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > 1<<16 {
			return nil, bad("header")
		}
		h.Extra = make([]int64, n)
		for i := range h.Extra {
			if h.Extra[i], err = binary.ReadVarint(r); err != nil {
				return nil, bad("header")
			}
		}
	}
	if v3 {
		h.Right = true
		for _, p := range []*int64{&h.RightOffset, &h.RightLine} {
			if *p, err = binary.ReadVarint(r); err != nil {
				return nil, bad("header")
			}
		}
	}
	if err := h.check(); err != "" {
		return nil, bad(err)
	}
	for {
		kl, err := binary.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad("entry")
		}
		vl, err := binary.ReadUvarint(r)
		if err != nil || kl > uint64(len(body)) || vl > uint64(len(body)) {
			return nil, bad("entry")
		}
		kv := make([]byte, kl+vl)
		if _, err := io.ReadFull(r, kv); err != nil {
			return nil, bad("entry")
		}
		if _, err := q.Restore(kv[:kl], kv[kl:]); err != nil {
			return nil, err
		}
	}
	if err := q.FinishRestore(); err != nil {
		return nil, err
	}
	return &h, nil
}

// check says what in a header cannot be a run's position: a negative
// offset, line or output length, an offset without a line (or a line
// without an offset), a finished flag that is neither 0 nor 1.
func (h *ckptHeader) check() string {
	for _, v := range append([]int64{h.InputOffset, h.Line, h.Outputs[0], h.Outputs[1], h.Outputs[2], h.RightOffset, h.RightLine}, h.Extra...) {
		if v < 0 {
			return "a negative offset, line or length in the header"
		}
	}
	if (h.InputOffset == 0) != (h.Line == 0) || (h.RightOffset == 0) != (h.RightLine == 0) {
		return "an input offset and line that do not agree"
	}
	return ""
}

// resumableFile is an output that a resumed run cuts back to its
// checkpointed length before writing on.
type resumableFile struct {
	f *os.File
	w *bufio.Writer
	n int64 // bytes written, buffered included
}

// openResumable opens output path (made 0600 if new) and locks it for
// the run before cutting it back.
func openResumable(path string, keep int64) (*resumableFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockOutput(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &resumableFile{f: f, w: bufio.NewWriterSize(f, 256<<10), n: keep}, nil
}

func (r *resumableFile) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	r.n += int64(n)
	return n, err
}

// sync makes everything written so far durable and returns the length.
func (r *resumableFile) sync() (int64, error) {
	if err := r.w.Flush(); err != nil {
		return 0, err
	}
	return r.n, r.f.Sync()
}

func (r *resumableFile) Close() error {
	err := r.w.Flush()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}
