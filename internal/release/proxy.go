package main

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// maxZip is the go command's limit on a module's unzipped size.
const maxZip = 500 << 20

// writeProxy writes the module in each of dirs (under root), at version,
// as the files a module proxy serves for it, under out. stamp is the
// release commit's time (RFC 3339), the version's time in .info.
func writeProxy(root, version, stamp, out string, dirs []string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return fmt.Errorf("%w: release time %q: %v", ErrVersion, stamp, err)
	}
	for _, d := range dirs {
		m, err := readGoMod(root, d)
		if err != nil {
			return err
		}
		if err := writeModule(filepath.Join(root, d), m.Module.Path, version, t, out); err != nil {
			return err
		}
	}
	return nil
}

func writeModule(dir, path, version string, t time.Time, out string) error {
	at := filepath.Join(out, filepath.FromSlash(escape(path)), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	base := filepath.Join(at, escape(version))
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return err
	}
	info, _ := json.Marshal(struct{ Version, Time string }{version, t.UTC().Format(time.RFC3339)})
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return err
	}
	if err := writeZip(dir, path+"@"+version, base+".zip"); err != nil {
		return fmt.Errorf("module %s: %w", path, err)
	}
	return addToList(filepath.Join(at, "list"), version)
}

// moduleFiles lists the files of the module rooted at dir as the go
// command zips them: regular files only, none under a subdirectory that is
// a module of its own.
func moduleFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			switch d.Name() {
			case ".git", ".hg", ".svn", ".bzr":
				return filepath.SkipDir
			case "vendor":
				return fmt.Errorf("%w: %s: a module zip leaves vendor directories out; a release has none", ErrLayout, p)
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

func writeZip(dir, prefix, file string) (err error) {
	files, err := moduleFiles(dir)
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	var size int64
	for _, name := range files {
		n, err := addFile(zw, filepath.Join(dir, filepath.FromSlash(name)), prefix+"/"+name)
		if err != nil {
			return err
		}
		if size += n; size > maxZip {
			return fmt.Errorf("%w: %s: the files come to more than %d bytes, the most a module may hold", ErrLayout, dir, maxZip)
		}
	}
	return zw.Close()
}

func addFile(zw *zip.Writer, src, name string) (int64, error) {
	r, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	if err != nil {
		return 0, err
	}
	return io.Copy(w, r)
}

func addToList(list, version string) error {
	old, err := os.ReadFile(list)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if slices.Contains(strings.Fields(string(old)), version) {
		return nil
	}
	return os.WriteFile(list, append(old, version+"\n"...), 0o644)
}

// escape is a module path or version as the proxy protocol spells it in a
// URL: each capital letter is '!' and the letter in lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
