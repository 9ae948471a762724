module github.com/loomgraph/loom

go 1.26.0

require (
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sync v0.24.0
	gonum.org/v1/gonum v0.17.0
)

require golang.org/x/sys v0.49.0
