package fuse

import (
	"fmt"
	"io"
)

// Entry is one line of the compile log: a pass's note, or a reason why a
// node was not fused into its consumer's kernel.
type Entry struct {
	Pass   string
	Node   int // node ID, -1 if none
	Reason string
}

// Log collects entries in order.
type Log struct{ Entries []Entry }

// Add records an entry.
func (l *Log) Add(pass string, node int, format string, a ...any) {
	l.Entries = append(l.Entries, Entry{Pass: pass, Node: node, Reason: fmt.Sprintf(format, a...)})
}

// Write prints the log, one entry per line.
func (l *Log) Write(w io.Writer) error {
	for _, e := range l.Entries {
		var err error
		if e.Node >= 0 {
			_, err = fmt.Fprintf(w, "%s: %%%d: %s\n", e.Pass, e.Node, e.Reason)
		} else {
			_, err = fmt.Fprintf(w, "%s: %s\n", e.Pass, e.Reason)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
