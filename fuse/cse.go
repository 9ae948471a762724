package fuse

// cse merges duplicate nodes. Nodes are hash-consed, so rebuilding the graph
// through Intern is the whole pass; it matters after passes that rewrite
// nodes (fold), which can make two different chains identical.
func cse(s *State) error {
	before := len(s.Graph.Nodes)
	s.Graph = s.Graph.Rebuild(irCopy)
	if merged := before - len(s.Graph.Nodes); merged > 0 {
		s.Log.Add("cse", -1, "merged %d duplicate nodes", merged)
	}
	return nil
}
