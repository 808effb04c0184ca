//go:build cuda

package cuda

// Stream capture and graph launch: cu v0.9.6 builds graphs node by node
// but wraps neither capture nor instantiation nor launch, and capture is
// what records NCCL's kernels together with ours.

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"

	"github.com/fsdpc/fsdpc/executor/gpu"
)

// graphExec is an instantiated graph.
type graphExec struct{ g C.CUgraphExec }

func (g graphExec) destroy() error { return check(C.cuGraphExecDestroy(g.g)) }

// BeginCapture starts capturing s in relaxed mode: the global and
// thread-local modes make "unsafe" calls such as cuMemAlloc or a
// synchronous cuMemcpy fail, and invalidate the capture, while it is
// under way; Device methods that make such calls (Alloc, Upload) run on
// the capturing thread, and NCCL may set up lazily during its first
// captured collective.
func (d *Device) BeginCapture(s gpu.Stream) error {
	return d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := check(C.cuStreamBeginCapture(rawStream(cs), C.CU_STREAM_CAPTURE_MODE_RELAXED)); err != nil {
			return fmt.Errorf("cuda: cuStreamBeginCapture stream %d: %w", s, err)
		}
		return nil
	})
}

// EndCapture ends the capture of s and instantiates the graph; the
// captured template is dropped, as only the executable graph is replayed.
func (d *Device) EndCapture(s gpu.Stream) (gpu.Graph, error) {
	var id gpu.Graph
	err := d.do(func(st *state) error {
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		var g C.CUgraph
		if err := check(C.cuStreamEndCapture(rawStream(cs), &g)); err != nil {
			return fmt.Errorf("cuda: cuStreamEndCapture stream %d (did every forked stream join back?): %w", s, err)
		}
		defer C.cuGraphDestroy(g)
		var exec C.CUgraphExec
		// cuGraphInstantiateWithFlags has one signature from CUDA 11.4
		// on, where cuGraphInstantiate changed its between 11 and 12.
		// Capture copies each kernel's stream priority into its node
		// (CUDA 11.7); without USE_NODE_PRIORITY a replay runs every
		// node at the launch stream's priority, and the plan's
		// high-priority communication streams lose theirs (issue 29,
		// N10).
		if err := check(C.cuGraphInstantiateWithFlags(&exec, g, C.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)); err != nil {
			return fmt.Errorf("cuda: cuGraphInstantiateWithFlags of stream %d's capture: %w", s, err)
		}
		st.graphs = append(st.graphs, graphExec{exec})
		id = gpu.Graph(len(st.graphs))
		return nil
	})
	return id, err
}

// LaunchGraph replays graph g on s.
func (d *Device) LaunchGraph(g gpu.Graph, s gpu.Stream) error {
	return d.do(func(st *state) error {
		if g < 1 || int(g) > len(st.graphs) {
			return fmt.Errorf("cuda: graph %d was not made by this device", g)
		}
		cs, err := st.stream(s)
		if err != nil {
			return err
		}
		if err := check(C.cuGraphLaunch(st.graphs[g-1].g, rawStream(cs))); err != nil {
			return fmt.Errorf("cuda: cuGraphLaunch graph %d on stream %d: %w", g, s, err)
		}
		return nil
	})
}
