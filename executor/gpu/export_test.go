package gpu

// CallsInside reports how many calls are inside a Guard-wrapped
// communicator, so a test can act while one is, without guessing with a
// sleep.
func CallsInside(c Comm) int {
	g := c.(*guarded)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}
