package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// refFile is tokenizer/testdata/tokenizer_refs.json, written by
// scripts/tokenizer_refs.py (transformers) or its Node stand-in
// scripts/tokenizer_refs_node.mjs (the same Rust tokenizers library).
type refFile struct {
	Generator  string
	Tokenizers map[string]struct {
		File   string
		Config map[string]string
		Cases  []struct {
			Text     string
			IDs      []int `json:"ids"`
			IDsPlain []int `json:"ids_plain"`
			Decoded  string
		}
		Decodes []struct {
			IDs  []int `json:"ids"`
			Text string
		}
	}
}

func loadRefs(t *testing.T) *refFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tokenizer_refs.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("no tokenizer/testdata/tokenizer_refs.json: run scripts/tokenizer_refs.py")
	}
	if err != nil {
		t.Fatal(err)
	}
	var r refFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tokenizers) == 0 {
		t.Fatal("reference file lists no tokenizers")
	}
	return &r
}

// loadRefTokenizer loads a reference tokenizer.json through LoadJSON, with
// the tokenizer_config.json the reference used beside it.
func loadRefTokenizer(t *testing.T, file string, cfg map[string]string) *Tokenizer {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644)
	cb, _ := json.Marshal(cfg)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cb, 0o644)
	tk, err := LoadJSON(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestReferenceIDs compares Encode and Decode with the ids and text the
// Hugging Face stack produced for the same tokenizer.json.
func TestReferenceIDs(t *testing.T) {
	refs := loadRefs(t)
	t.Logf("references from %s", refs.Generator)
	names := make([]string, 0, len(refs.Tokenizers))
	for n := range refs.Tokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := refs.Tokenizers[name]
		t.Run(name, func(t *testing.T) {
			tk := loadRefTokenizer(t, ref.File, ref.Config)
			if len(ref.Cases) == 0 || len(ref.Decodes) == 0 {
				t.Fatal("no cases")
			}
			if bos := ref.Config["bos_token"]; bos != "" && tk.BOS() >= 0 {
				if s, _ := tk.Token(tk.BOS()); s != bos {
					t.Errorf("BOS is %q, config says %q", s, bos)
				}
			}
			if eos := ref.Config["eos_token"]; eos != "" {
				if s, _ := tk.Token(tk.EOS()); s != eos {
					t.Errorf("EOS is %q, config says %q", s, eos)
				}
			}
			for _, c := range ref.Cases {
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDsPlain) && !(len(got) == 0 && len(c.IDsPlain) == 0) {
					t.Errorf("Encode(%q, false)\n got %v\nwant %v", c.Text, got, c.IDsPlain)
				}
				if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDs) {
					t.Errorf("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDs)
				}
				if got := tk.Decode(c.IDsPlain); got != c.Decoded {
					t.Errorf("Decode(%v)\n got %q\nwant %q", c.IDsPlain, got, c.Decoded)
				}
				checkStream(t, tk, c.IDs)
			}
			for _, d := range ref.Decodes {
				if got := tk.Decode(d.IDs); got != d.Text {
					t.Errorf("Decode(%v)\n got %q\nwant %q", d.IDs, got, d.Text)
				}
				checkStream(t, tk, d.IDs)
			}
		})
	}
}

// checkStream decodes ids one at a time and checks the pieces join to
// Decode(ids) and each piece is complete UTF-8 when the whole text is.
func checkStream(t *testing.T, tk *Tokenizer, ids []int) {
	t.Helper()
	want := tk.Decode(ids)
	sd := tk.Stream()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(sd.Add(id))
	}
	b.WriteString(sd.Flush())
	if b.String() != want {
		t.Errorf("stream of %v gives %q, Decode gives %q", ids, b.String(), want)
	}
}
