package executor

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/schedule"
)

// The reference computes the training steps without sharding, from FSDP2's
// semantics (docs/semantics.md) and not from the plan's program: full
// tensors, every rank's gradients, the casts FSDP2 makes where it makes
// them, reductions in rank order 0, 1, … with the group's reduce ops and
// divide factors, gradient accumulation in the train setup's mode, and the
// optimizer. From the plan it takes the layout, the policies, the train
// setup and, as the model's structure, how many backward segments each
// group has.

// reducer folds the inputs of one reduced element in rank order, with the
// arithmetic of an NCCL reduction: AVG and PREMUL_SUM multiply each input
// by the scalar (1/n or the factor, in the reduce dtype) as they load it,
// then every addition rounds to the dtype.
type reducer struct {
	dt     ir.DType
	premul bool
	s      float64
}

func newReducer(dt ir.DType, op schedule.ReduceOp, factor float64, n int) (reducer, error) {
	switch op {
	case schedule.ReduceSum:
		return reducer{dt: dt}, nil
	case schedule.ReduceAvg:
		return reducer{dt: dt, premul: true, s: roundTo(dt, 1/float64(n))}, nil
	case schedule.ReducePremulSum:
		if !(factor > 0) {
			return reducer{}, fmt.Errorf("premul-sum with factor %v", factor)
		}
		return reducer{dt: dt, premul: true, s: roundTo(dt, factor)}, nil
	}
	return reducer{}, fmt.Errorf("reduce op %s cannot reduce", op)
}

func (r reducer) first(x float64) float64 {
	if r.premul {
		return opRound(r.dt, x*r.s)
	}
	return x
}

func (r reducer) next(acc, x float64) float64 {
	if r.premul {
		x = opRound(r.dt, x*r.s)
	}
	return opRound(r.dt, acc+x)
}

// expectations are what a correct run produces, per step: the unsharded
// parameters every rank must gather (bytes of the unsharded buffer) and
// the sharded gradient every rank's optimizer must see; and after the
// last step, every rank's sharded parameters and optimizer states.
type expectations struct {
	gathered [][][]byte   // [step][group]
	grads    [][][][]byte // [step][group][rank]
	params   [][][]byte   // [group][rank]: the final sharded parameters
	states   [][][]byte   // [group][rank]: the final optimizer states
	// initial sharded parameters: [group][rank]
	initial [][][]byte
}

type refGroup struct {
	gl     *GroupLayout
	full   [][]float64   // [param] the parameter in Orig, unpadded
	states [][][]float64 // [param][state]
	nseg   int           // backward ops per micro-batch
}

type reference struct {
	p       *schedule.Plan
	R, S    int
	steps   int
	opt     *optimizer
	groups  []*refGroup
	exp     *expectations
	accum   int
	unshAcc bool
}

// newReference sets up the initial parameters; nseg is the number of
// backward ops of each group in a micro-batch.
func newReference(p *schedule.Plan, layouts []*GroupLayout, nseg []int, steps int, opt *optimizer) (*reference, error) {
	ref := &reference{p: p, R: p.Cluster.Replicate, S: p.Cluster.Shard, steps: steps, opt: opt,
		accum: int(p.Train.GradAccum), unshAcc: p.Train.AccumulateUnsharded, exp: &expectations{}}
	if ref.accum < 1 {
		return nil, fmt.Errorf("grad_accum %d: it must be at least 1", ref.accum)
	}
	for gi, gl := range layouts {
		rg := &refGroup{gl: gl, nseg: nseg[gi]}
		for _, pl := range gl.Params {
			f := make([]float64, pl.Numel)
			for i := range f {
				f[i] = roundTo(pl.DType, initValue(pl.hash, int64(i)))
			}
			rg.full = append(rg.full, f)
			var st [][]float64
			if pl.trainable() {
				for s := 0; s < opt.states; s++ {
					st = append(st, make([]float64, pl.Numel))
				}
			}
			rg.states = append(rg.states, st)
		}
		if gl.GradShardNumel > 0 && rg.nseg == 0 {
			return nil, fmt.Errorf("group %s trains, but no backward op writes its gradients", gl.Name)
		}
		ref.groups = append(ref.groups, rg)
	}
	ref.exp.initial = ref.shardParams()
	return ref, nil
}

// shardParams lays out every rank's sharded parameters.
func (ref *reference) shardParams() [][][]byte {
	out := make([][][]byte, len(ref.groups))
	for gi, rg := range ref.groups {
		gl := rg.gl
		out[gi] = make([][]byte, ref.R*ref.S)
		for rank := range out[gi] {
			b := make([]byte, gl.ShardedBytes)
			k := int64(rank % ref.S)
			for pi := range gl.Params {
				pl := &gl.Params[pi]
				region := b[pl.ShardedOffset:]
				pl.forShard(k, func(so, lo, n int64) {
					for t := int64(0); t < n; t++ {
						store(pl.DType, region, so+t, rg.full[pi][lo+t])
					}
				})
			}
			out[gi][rank] = b
		}
	}
	return out
}

func (ref *reference) shardStates() [][][]byte {
	out := make([][][]byte, len(ref.groups))
	st := int64(ref.opt.states)
	for gi, rg := range ref.groups {
		gl := rg.gl
		out[gi] = make([][]byte, ref.R*ref.S)
		if gl.GradShardNumel == 0 || st == 0 {
			continue
		}
		for rank := range out[gi] {
			b := make([]byte, gl.GradShardNumel*st*4)
			k := int64(rank % ref.S)
			for pi := range gl.Params {
				pl := &gl.Params[pi]
				if !pl.trainable() {
					continue
				}
				pl.forShard(k, func(so, lo, n int64) {
					for s := int64(0); s < st; s++ {
						for t := int64(0); t < n; t++ {
							store(ir.FP32, b, s*gl.GradShardNumel+pl.GradOffset+so+t, rg.states[pi][s][lo+t])
						}
					}
				})
			}
			out[gi][rank] = b
		}
	}
	return out
}

// run computes every step; groups are independent, so they are computed
// in parallel.
func (ref *reference) run() {
	for t := 0; t < ref.steps; t++ {
		gathered := make([][]byte, len(ref.groups))
		grads := make([][][]byte, len(ref.groups))
		next := make(chan int)
		var wg sync.WaitGroup
		for w := 0; w < runtime.GOMAXPROCS(0); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for gi := range next {
					rg := ref.groups[gi]
					gathered[gi] = rg.gather(ref.S)
					if rg.gl.GradShardNumel > 0 {
						grads[gi] = ref.step(rg, gathered[gi], t)
					}
				}
			}()
		}
		for gi := range ref.groups {
			next <- gi
		}
		close(next)
		wg.Wait()
		ref.exp.gathered = append(ref.exp.gathered, gathered)
		ref.exp.grads = append(ref.exp.grads, grads)
	}
	ref.exp.params = ref.shardParams()
	ref.exp.states = ref.shardStates()
}

// gather is the unsharded buffer every rank must hold: each parameter's
// W shards, rank-major, cast to its gather dtype, padding zero.
func (rg *refGroup) gather(S int) []byte {
	gl := rg.gl
	W := int64(S)
	b := make([]byte, W*gl.RowBytes)
	for pi := range gl.Params {
		pl := &gl.Params[pi]
		region := b[W*pl.GatherOffset:]
		for k := int64(0); k < W; k++ {
			pl.forShard(k, func(so, lo, n int64) {
				for t := int64(0); t < n; t++ {
					store(pl.Gather, region, k*pl.ShardNumel+so+t, rg.full[pi][lo+t])
				}
			})
		}
	}
	return b
}

// step runs one training step of a trainable group and returns every
// rank's expected sharded gradient (in Orig).
func (ref *reference) step(rg *refGroup, gathered []byte, t int) [][]byte {
	gl := rg.gl
	W, R := ref.S, ref.R
	world := W * R
	cd, rd, od := gl.Compute, gl.Reduce, gl.Orig
	pol := &gl.Policy
	// The unsharded parameter values each rank computes with.
	u := make([][]float64, len(gl.Params))
	for pi := range gl.Params {
		pl := &gl.Params[pi]
		if !pl.trainable() {
			continue
		}
		u[pi] = make([]float64, pl.Numel)
		region := gathered[int64(W)*pl.GatherOffset:]
		for k := int64(0); k < int64(W); k++ {
			pl.forShard(k, func(so, lo, n int64) {
				for x := int64(0); x < n; x++ {
					u[pi][lo+x] = load(pl.Gather, region, k*pl.ShardNumel+so+x)
				}
			})
		}
	}
	N := gl.GradNumel
	Sg := gl.GradShardNumel
	ugrads := make([][]float64, world) // autograd's unsharded gradients, in cd
	accum := make([][]float64, world)  // the no-sync accumulator, in rd
	sharded := make([][]float64, world)
	inPlace := ref.unshAcc && rd == cd // autograd keeps accumulating into .grad
	for mb := 0; mb < ref.accum; mb++ {
		sync := !ref.unshAcc || mb == ref.accum-1
		rsIn := make([][]float64, world)
		for q := 0; q < world; q++ {
			if !(inPlace && mb > 0) {
				ugrads[q] = nil
			}
			for j := 0; j < rg.nseg; j++ {
				seed := gradSeed{rank: q, micro: mb, step: t, ordinal: j}
				if ugrads[q] == nil {
					ugrads[q] = make([]float64, N)
					for pi := range gl.Params {
						pl := &gl.Params[pi]
						if pl.trainable() {
							c := seed.coeffs(pl.hash)
							for i := int64(0); i < pl.Numel; i++ {
								ugrads[q][pl.GradFlat+i] = roundTo(cd, c.grad(u[pi][i], i))
							}
						}
					}
					continue
				}
				for pi := range gl.Params {
					pl := &gl.Params[pi]
					if pl.trainable() {
						c := seed.coeffs(pl.hash)
						for i := int64(0); i < pl.Numel; i++ {
							x := &ugrads[q][pl.GradFlat+i]
							*x = opRound(cd, *x+roundTo(cd, c.grad(u[pi][i], i)))
						}
					}
				}
			}
			src := ugrads[q]
			if rd != cd && ref.unshAcc {
				// Non-final micro-batches move the gradients into an
				// accumulator of the reduce dtype; the last adds its own.
				if accum[q] == nil {
					accum[q] = make([]float64, N)
					for i, x := range ugrads[q] {
						accum[q][i] = roundTo(rd, x)
					}
				} else {
					for i, x := range ugrads[q] {
						accum[q][i] = opRound(rd, accum[q][i]+x)
					}
				}
				src = accum[q]
			}
			if !sync {
				continue
			}
			// Chunk-cat into the reduce-scatter input, cast to rd, padded;
			// then the pre-divide.
			in := make([]float64, int64(W)*Sg)
			for k := int64(0); k < int64(W); k++ {
				for pi := range gl.Params {
					pl := &gl.Params[pi]
					if !pl.trainable() {
						continue
					}
					pl.forShard(k, func(so, lo, n int64) {
						for x := int64(0); x < n; x++ {
							in[k*Sg+pl.GradOffset+so+x] = roundTo(rd, src[pl.GradFlat+lo+x])
						}
					})
				}
			}
			if pol.PreDivide != 1 {
				for i := range in {
					in[i] = opRound(rd, in[i]/pol.PreDivide)
				}
			}
			rsIn[q] = in
		}
		if !sync {
			continue
		}
		// Reduce-scatter over each shard group, then all-reduce over each
		// replicate group, each in rank order.
		rs, _ := newReducer(rd, pol.ReduceScatterOp, pol.PremulFactor, W)
		out := make([][]float64, world)
		for q := 0; q < world; q++ {
			r, k := q/W, int64(q%W)
			o := make([]float64, Sg)
			for e := int64(0); e < Sg; e++ {
				acc := rs.first(rsIn[r*W][k*Sg+e])
				for j := 1; j < W; j++ {
					acc = rs.next(acc, rsIn[r*W+j][k*Sg+e])
				}
				o[e] = acc
			}
			out[q] = o
		}
		if R > 1 {
			ar, _ := newReducer(rd, pol.AllReduceOp, pol.PremulFactor, R)
			reduced := make([][]float64, world)
			for q := 0; q < world; q++ {
				k := q % W
				o := make([]float64, Sg)
				for e := range o {
					acc := ar.first(out[k][e])
					for r := 1; r < R; r++ {
						acc = ar.next(acc, out[r*W+k][e])
					}
					o[e] = acc
				}
				reduced[q] = o
			}
			out = reduced
		}
		for q := 0; q < world; q++ {
			g := out[q]
			for e := range g {
				if pol.PostDivide != 1 {
					g[e] = opRound(rd, g[e]/pol.PostDivide)
				}
				g[e] = roundTo(od, g[e])
			}
			// FSDP2 adds a micro-batch's reduced gradient into the sharded
			// .grad left by an earlier one.
			if sharded[q] == nil {
				sharded[q] = g
			} else {
				for e := range g {
					sharded[q][e] = opRound(od, sharded[q][e]+g[e])
				}
			}
		}
	}
	// The optimizer: the full gradient from replica 0's shards.
	for pi := range gl.Params {
		pl := &gl.Params[pi]
		if !pl.trainable() {
			continue
		}
		g := make([]float64, pl.Numel)
		for k := int64(0); k < int64(W); k++ {
			pl.forShard(k, func(so, lo, n int64) {
				for x := int64(0); x < n; x++ {
					g[lo+x] = sharded[k][pl.GradOffset+so+x]
				}
			})
		}
		st := make([]float64, ref.opt.states)
		for i := range g {
			for s := range st {
				st[s] = rg.states[pi][s][i]
			}
			rg.full[pi][i] = ref.opt.apply(od, rg.full[pi][i], g[i], st, t+1)
			for s := range st {
				rg.states[pi][s][i] = st[s]
			}
		}
	}
	res := make([][]byte, world)
	for q := range res {
		b := make([]byte, Sg*od.Size())
		for e, x := range sharded[q] {
			store(od, b, int64(e), x)
		}
		res[q] = b
	}
	return res
}
