// Package executor will run a plan for real behind one backend interface:
// the host backend (ranks and streams as goroutines over real buffers) and
// the CUDA backend (driving package cuda in a separate worker binary).
//
// Nothing is implemented here yet (issues "Host executor" and "CUDA
// executor").
package executor
