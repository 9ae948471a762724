package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IndexFile is the name of the index a sharded Hugging Face checkpoint
// keeps beside its shards: {"metadata": {...}, "weight_map": {tensor: file}}.
const IndexFile = "model.safetensors.index.json"

// Dir is a checkpoint spread over several safetensors files of one
// directory. A tensor name is unique across the files.
type Dir struct {
	path  string
	files []*File          // in file-name order
	where map[string]*File // tensor name → its file
	index map[string]string
}

// OpenDir opens every *.safetensors file in dir and indexes their tensors
// by name. When dir holds model.safetensors.index.json, every entry of its
// weight_map must name a file of the directory that holds the tensor, and
// every file it names must exist. A tensor name found in two files is an
// error. On any error nothing stays open.
func OpenDir(dir string) (*Dir, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	d := &Dir{path: dir, where: map[string]*File{}}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".safetensors") && !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("safetensors: %s holds no *.safetensors file", dir)
	}
	byBase := map[string]*File{}
	for _, n := range names {
		f, err := Open(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		d.files = append(d.files, f)
		byBase[n] = f
		for _, t := range f.header.tensors {
			if g, dup := d.where[t.Name]; dup {
				return nil, fmt.Errorf("safetensors: %s: tensor %q is in both %s and %s", dir, t.Name, filepath.Base(g.name), n)
			}
			d.where[t.Name] = f
		}
	}
	idx, err := readIndex(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	if idx != nil {
		for _, tensor := range sortedKeys(idx) {
			file := idx[tensor]
			f, exists := byBase[file]
			if !exists {
				return nil, fmt.Errorf("safetensors: %s: %s maps tensor %q to %q, which is not a .safetensors file of the directory", dir, IndexFile, tensor, file)
			}
			if d.where[tensor] != f {
				return nil, fmt.Errorf("safetensors: %s: %s maps tensor %q to %s, which has no such tensor", dir, IndexFile, tensor, file)
			}
		}
		d.index = idx
	}
	ok = true
	return d, nil
}

// readIndex reads the weight_map of an index file; nil when there is none.
func readIndex(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %v", path, err)
	}
	if idx.WeightMap == nil {
		return nil, fmt.Errorf("safetensors: %s has no weight_map", path)
	}
	for tensor, file := range idx.WeightMap {
		// Shards are plain file names beside the index; anything else
		// could point outside the directory.
		if file != filepath.Base(file) || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
			return nil, fmt.Errorf("safetensors: %s maps tensor %q to %q, which is not a plain file name", path, tensor, file)
		}
	}
	return idx.WeightMap, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Close closes every file.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Files lists the opened files in file-name order.
func (d *Dir) Files() []*File { return slices.Clone(d.files) }

// HasIndex reports whether the directory had an index file.
func (d *Dir) HasIndex() bool { return d.index != nil }

// Names lists every tensor name, sorted.
func (d *Dir) Names() []string {
	names := make([]string, 0, len(d.where))
	for n := range d.where {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Info describes the tensor called name and names the file holding it.
func (d *Dir) Info(name string) (TensorInfo, *File, bool) {
	f, ok := d.where[name]
	if !ok {
		return TensorInfo{}, nil, false
	}
	t, _ := f.Info(name)
	return t, f, true
}

// Tensor returns the tensor called name from whichever file holds it.
func (d *Dir) Tensor(name string) (Tensor, error) {
	f, ok := d.where[name]
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: no file of %s has tensor %q", d.path, name)
	}
	return f.Tensor(name)
}
