package internal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLinkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE    = regexp.MustCompile("(?s)\n```.*?\n```")
	anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
)

// mdAnchor is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func mdAnchor(heading string) string {
	h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	return strings.ReplaceAll(anchorDrop.ReplaceAllString(h, ""), " ", "-")
}

func mdAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range strings.Split(fenceRE.ReplaceAllString(string(b), "\n"), "\n") {
		if strings.HasPrefix(l, "#") {
			out[mdAnchor(l)] = true
		}
	}
	return out
}

// TestDocLinks follows every relative link of every Markdown file (outside
// third_party): the file must exist and a #fragment must name one of its
// headings, so a section moved between docs cannot leave a link behind.
func TestDocLinks(t *testing.T) {
	links := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || n == "third_party" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(string(b), "\n"), -1) {
			target, frag, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, ":") {
				continue // a URL
			}
			links++
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), target)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: the link %s names no file", path, m[1])
				continue
			}
			if frag != "" && strings.HasSuffix(file, ".md") && !mdAnchors(t, file)[frag] {
				t.Errorf("%s: the link %s names no heading of %s", path, m[1], file)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if links < 20 {
		t.Fatalf("found %d relative links in the Markdown files; the walk missed them", links)
	}
}

// maxReadmeBytes keeps README.md an entry point: what ubik is, install,
// the two commands, one example and a link to each topic; the rest lives
// in docs/.
const maxReadmeBytes = 15 << 10

// TestReadmeLinksEveryTopic: README.md stays under maxReadmeBytes and
// links every topic doc under docs/.
func TestReadmeLinksEveryTopic(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxReadmeBytes {
		t.Errorf("README.md is %d bytes, over %d: move the detail into a topic doc under docs/", len(b), maxReadmeBytes)
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs under ../docs (%v)", err)
	}
	for _, d := range docs {
		if link := "](docs/" + filepath.Base(d) + ")"; !strings.Contains(string(b), link) {
			t.Errorf("README.md does not link %s (want a link ending %q)", d, link)
		}
	}
}
