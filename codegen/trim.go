package codegen

import (
	"regexp"
	"strings"
	"sync"
)

// PreludeFor returns the part of Prelude(t) that body uses: the prelude's
// items (below) that define a name body mentions, then the items those
// mention, and so on, in the prelude's order, plus the unconditional ones.
// Every Source's Code is PreludeFor(t, Body) + Body; a kernel then compiles
// and hashes only the helpers it calls (an f32 add carries loom_add and the
// vector load/store helpers, not gelu). Prelude(t) is a superset of every
// PreludeFor(t, body), so several bodies can still share one full prelude.
//
// An item is one top-level declaration of the prelude text: a function
// definition (one overload), a template, a struct or typedef, a #define or
// a #pragma. The comment block above a run of items goes with the run and
// is kept when any of the run's items is. An item defines one name: the
// function, template or type it declares, or the macro; it mentions the
// loom_… and LOOM_… identifiers of its code (comments aside). A name
// mentioned brings in every item that defines it, so all overloads of
// loom_add (integer, float and double, in the common and platform parts)
// come together and overload resolution sees what it sees in the full
// prelude. Items defining no name (#pragma) and the macros in
// alwaysNames are unconditional.
func PreludeFor(t Target, body string) string {
	ix, ok := preludeIndexFor(t)
	if !ok {
		return Prelude(t) // the error comment
	}
	return ix.render(ix.needs(mentions(body)))
}

// alwaysNames are the macros kept whatever a body uses: the declaration
// specifier every helper (and the hand-written kernels) use, and the
// platform and wave macros code tests with #ifdef or uses in arithmetic.
var alwaysNames = map[string]bool{"LOOM_DEV": true, "LOOM_AMD": true, "LOOM_NVIDIA": true, "LOOM_WAVE": true}

// preludeItem is one top-level declaration of the prelude.
type preludeItem struct {
	text    string   // its lines, each ending in a newline
	defines string   // the name it declares, "" for none
	refs    []string // the loom_/LOOM_ names its code mentions, other than defines
	always  bool     // kept whatever the body uses
}

// preludeRun is a comment block (and the blank lines before it) and the
// items that follow it up to the next comment or blank line.
type preludeRun struct {
	lead  string
	items []int
}

// preludeIndex is Prelude(t) split into items.
type preludeIndex struct {
	runs   []preludeRun
	items  []preludeItem
	byName map[string][]int // name → the items defining it
}

var preludeIndexes sync.Map // checked Target → *preludeIndex

// preludeIndexFor returns the index of Prelude(t), built once per target;
// false for an invalid target.
func preludeIndexFor(t Target) (*preludeIndex, bool) {
	t, err := t.check()
	if err != nil {
		return nil, false
	}
	if ix, ok := preludeIndexes.Load(t); ok {
		return ix.(*preludeIndex), true
	}
	ix, _ := preludeIndexes.LoadOrStore(t, indexPrelude(Prelude(t)))
	return ix.(*preludeIndex), true
}

var (
	// mentionRE matches the identifiers the prelude defines and uses.
	mentionRE = regexp.MustCompile(`\b(?:loom|LOOM)_\w+`)
	// A function or template's name is the first identifier before a "(".
	funcNameRE = regexp.MustCompile(`\b([A-Za-z_]\w*)\s*\(`)
	defineRE   = regexp.MustCompile(`^#\s*define\s+(\w+)`)
	typeRE     = regexp.MustCompile(`^(?:template\s*<[^>]*>\s*)?(?:struct|class|union|enum)\s+(\w+)`)
	typedefRE  = regexp.MustCompile(`^typedef\b.*?(\w+)\s*;\s*$`)
)

// indexPrelude splits a prelude text into runs of items. A line that is
// blank or a comment at the top level ends the current run; any other line
// starts an item, which runs on until its braces balance and it ends in
// "}" or ";" (a preprocessor line: until a line without a trailing
// backslash).
func indexPrelude(text string) *preludeIndex {
	ix := &preludeIndex{byName: map[string][]int{}}
	lines := strings.SplitAfter(text, "\n")
	var lead strings.Builder
	open := false // the last run has items and can take more
	for i := 0; i < len(lines); {
		s := strings.TrimSpace(lines[i])
		if s == "" || strings.HasPrefix(s, "//") {
			open = false
			lead.WriteString(lines[i])
			i++
			continue
		}
		start := i
		if strings.HasPrefix(s, "#") {
			for i++; strings.HasSuffix(strings.TrimRight(lines[i-1], "\n"), "\\") && i < len(lines); i++ {
			}
		} else {
			depth := 0
			for i < len(lines) {
				code := stripComments(lines[i])
				depth += strings.Count(code, "{") - strings.Count(code, "}")
				i++
				if end := strings.TrimSpace(code); depth <= 0 && (strings.HasSuffix(end, "}") || strings.HasSuffix(end, ";")) {
					break
				}
			}
		}
		if !open {
			ix.runs = append(ix.runs, preludeRun{lead: lead.String()})
			lead.Reset()
			open = true
		}
		it := newPreludeItem(strings.Join(lines[start:i], ""))
		n := len(ix.items)
		ix.items = append(ix.items, it)
		ix.runs[len(ix.runs)-1].items = append(ix.runs[len(ix.runs)-1].items, n)
		if it.defines != "" {
			ix.byName[it.defines] = append(ix.byName[it.defines], n)
		}
	}
	if lead.Len() > 0 {
		ix.runs = append(ix.runs, preludeRun{lead: lead.String()})
	}
	return ix
}

// newPreludeItem reads the name an item's text declares and the names it
// mentions.
func newPreludeItem(text string) preludeItem {
	code := strings.TrimSpace(stripComments(text))
	it := preludeItem{text: text}
	if m := defineRE.FindStringSubmatch(code); m != nil {
		it.defines = m[1]
	} else if strings.HasPrefix(code, "#") {
		// #pragma and the like: no name.
	} else if m := typeRE.FindStringSubmatch(code); m != nil {
		it.defines = m[1]
	} else if m := typedefRE.FindStringSubmatch(code); m != nil {
		it.defines = m[1]
	} else if m := funcNameRE.FindStringSubmatch(code); m != nil {
		it.defines = m[1]
	}
	it.always = it.defines == "" || alwaysNames[it.defines]
	seen := map[string]bool{it.defines: true}
	for _, n := range mentionRE.FindAllString(code, -1) {
		if !seen[n] {
			seen[n] = true
			it.refs = append(it.refs, n)
		}
	}
	return it
}

// needs returns the names the prelude must define for code mentioning
// names: those it defines, and transitively the names their items mention.
func (ix *preludeIndex) needs(names []string) map[string]bool {
	need := map[string]bool{}
	var work []string
	add := func(n string) {
		if _, ok := ix.byName[n]; ok && !need[n] {
			need[n] = true
			work = append(work, n)
		}
	}
	for _, n := range names {
		add(n)
	}
	for _, it := range ix.items {
		if it.always {
			add(it.defines)
			for _, r := range it.refs {
				add(r)
			}
		}
	}
	for len(work) > 0 {
		n := work[len(work)-1]
		work = work[:len(work)-1]
		for _, i := range ix.byName[n] {
			for _, r := range ix.items[i].refs {
				add(r)
			}
		}
	}
	return need
}

// render writes the items that are unconditional or define a needed name,
// in order, each run's comment block with them; comment blocks that
// precede no item (the end marker) are always written.
func (ix *preludeIndex) render(need map[string]bool) string {
	var b strings.Builder
	for _, r := range ix.runs {
		keep := len(r.items) == 0
		for _, i := range r.items {
			if it := ix.items[i]; it.always || need[it.defines] {
				keep = true
				break
			}
		}
		if !keep {
			continue
		}
		b.WriteString(r.lead)
		for _, i := range r.items {
			if it := ix.items[i]; it.always || need[it.defines] {
				b.WriteString(it.text)
			}
		}
	}
	return b.String()
}

// mentions returns the loom_/LOOM_ identifiers of code, comments aside,
// each once.
func mentions(code string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range mentionRE.FindAllString(stripComments(code), -1) {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// stripComments blanks the // and /* */ comments of C++ text, leaving
// string and character literals alone.
func stripComments(s string) string {
	if !strings.Contains(s, "/") {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c == '\'':
			for i++; i < len(b) && b[i] != c && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			b[i], b[i+1] = ' ', ' '
			for i += 2; i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}
