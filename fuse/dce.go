package fuse

// dce removes nodes no output depends on. Inputs are kept even when unused:
// a run still checks every declared input.
func dce(s *State) error {
	before := len(s.Graph.Nodes)
	s.Graph = s.Graph.Rebuild(irCopy)
	if removed := before - len(s.Graph.Nodes); removed > 0 {
		s.Log.Add("dce", -1, "removed %d dead nodes", removed)
	}
	return nil
}
