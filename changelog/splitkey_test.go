package changelog

import (
	"errors"
	"strings"
	"testing"
)

func TestSplitKeyValid(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want []string
	}{
		{`[]`, nil},
		{` [ ] `, nil},
		{`["acme", "2026-07-18 10:00:00"]`, []string{`"acme"`, `"2026-07-18 10:00:00"`}},
		{`[null,true,false,0,-0,1.5,-2e+10,3E-2,12]`, []string{`null`, `true`, `false`, `0`, `-0`, `1.5`, `-2e+10`, `3E-2`, `12`}},
		{"[\t\"a\"\n,\r\"b\" ]", []string{`"a"`, `"b"`}},
		{`["a, b]", "\"]", "\\", "\u00e9\ud83d\ude00", "\/\b\f\n\r\t"]`,
			[]string{`"a, b]"`, `"\"]"`, `"\\"`, `"\u00e9\ud83d\ude00"`, `"\/\b\f\n\r\t"`}},
		{`["é"]`, []string{`"é"`}}, // raw UTF-8 is valid JSON
		{`[""]`, []string{`""`}},
		{`[1.000]`, []string{`1.000`}},
	} {
		parts, err := SplitKey([]byte(tc.key))
		if err != nil {
			t.Errorf("SplitKey(%s): %v", tc.key, err)
			continue
		}
		if len(parts) != len(tc.want) {
			t.Errorf("SplitKey(%s) = %q, want %q", tc.key, parts, tc.want)
			continue
		}
		for i := range parts {
			if string(parts[i]) != tc.want[i] {
				t.Errorf("SplitKey(%s)[%d] = %s, want %s", tc.key, i, parts[i], tc.want[i])
			}
		}
	}
}

func TestSplitKeyMalformed(t *testing.T) {
	for _, tc := range []struct {
		key    string
		offset int
		msg    string
	}{
		{``, 0, "empty key"},
		{`   `, 3, "empty key"},
		{`"acme"`, 0, "want '['"},
		{`[`, 1, "unterminated array"},
		{`["a"`, 4, "unterminated array"},
		{`["a",]`, 5, "missing cell"},
		{`[,"a"]`, 1, "unexpected ','"},
		{`["a" "b"]`, 5, "want ',' or ']'"},
		{`["a"] x`, 6, "trailing bytes"},
		{`[][]`, 2, "trailing bytes"},
		{`[["a"]]`, 1, "nested"},
		{`[{"a": 1}]`, 1, "nested"},
		{`["a]`, 1, "unterminated string"},
		{`["a\x"]`, 3, "invalid escape"},
		{`["\u12g4"]`, 2, `invalid \u escape`},
		{`["\u12"]`, 2, `invalid \u escape`},
		{`["\`, 2, "unterminated escape"},
		{"[\"a\nb\"]", 3, "raw control character"},
		{"[\"a\xffb\"]", 3, "invalid UTF-8"},
		{`[01]`, 2, "want ',' or ']'"},
		{`[-]`, 2, "want a digit"},
		{`[1.]`, 3, "after '.'"},
		{`[1e]`, 3, "exponent digit"},
		{`[+1]`, 1, "unexpected '+'"},
		{`[.5]`, 1, "unexpected '.'"},
		{`[tru]`, 1, "want true"},
		{`[nul`, 1, "want null"},
		{`[NaN]`, 1, "unexpected 'N'"},
		{`[falsey]`, 6, "want ',' or ']'"},
	} {
		parts, err := SplitKey([]byte(tc.key))
		var ke *KeyError
		if !errors.As(err, &ke) || !errors.Is(err, ErrMalformedKey) {
			t.Errorf("SplitKey(%q) = %q, %v; want a *KeyError", tc.key, parts, err)
			continue
		}
		if ke.Offset != tc.offset || !strings.Contains(ke.Msg, tc.msg) {
			t.Errorf("SplitKey(%q): %v; want offset %d and %q", tc.key, err, tc.offset, tc.msg)
		}
		if parts != nil {
			t.Errorf("SplitKey(%q) returned parts %q with an error", tc.key, parts)
		}
	}
}

func TestAppendSplitKeyReuse(t *testing.T) {
	dst := [][]byte{[]byte("keep")}
	dst, err := AppendSplitKey(dst, []byte(`[1, 2]`))
	if err != nil || len(dst) != 3 || string(dst[0]) != "keep" || string(dst[2]) != "2" {
		t.Fatalf("AppendSplitKey = %q, %v", dst, err)
	}
	dst, err = AppendSplitKey(dst, []byte(`[1, 2, ]`))
	if err == nil || len(dst) != 3 {
		t.Fatalf("AppendSplitKey on bad key = %q, %v; want the 3 old parts and an error", dst, err)
	}
}

func TestGroupKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		pos  []int
		want string
	}{
		{`["acme", "2026-07-18 10:00:00"]`, []int{1}, `["acme"]`},
		{`["2026-07-18 10:00:00", "acme", 7]`, []int{0}, `["acme", 7]`},
		{`["a", "w1", "b", "w2"]`, []int{3, 1}, `["a", "b"]`},
		{`["a", "w"]`, []int{1, 1}, `["a"]`},
		{`["w"]`, []int{0}, `[]`},
		{`["a","b"]`, nil, `["a", "b"]`}, // re-joined in the contract spelling
		{`[ "a" ,"w" ]`, []int{1}, `["a"]`},
	} {
		got, err := GroupKey([]byte(tc.key), tc.pos)
		if err != nil || string(got) != tc.want {
			t.Errorf("GroupKey(%s, %v) = %s, %v; want %s", tc.key, tc.pos, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		key string
		pos []int
	}{
		{`["a", "w"]`, []int{2}},
		{`["a", "w"]`, []int{-1}},
		{`[]`, []int{0}},
	} {
		got, err := AppendGroupKey([]byte("keep"), []byte(tc.key), tc.pos)
		if !errors.Is(err, ErrWindowPosition) || string(got) != "keep" {
			t.Errorf("GroupKey(%s, %v) = %q, %v; want ErrWindowPosition and dst unchanged", tc.key, tc.pos, got, err)
		}
	}
	if _, err := GroupKey([]byte(`["a", "w"`), []int{1}); !errors.Is(err, ErrMalformedKey) {
		t.Errorf("GroupKey on a malformed key: %v, want ErrMalformedKey", err)
	}
}
