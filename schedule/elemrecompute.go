package schedule

// OpElemRecompute returns the part of o's element-wise traffic
// (ElemBytes) that reruns forward kernels: its module's ElemRecompute
// for a backward, 0 for any other op, for a module out of range, and for
// a plan that carries no figures.
func (p *Plan) OpElemRecompute(o *Op) int64 {
	if o.Kind != OpBackward || o.Module < 0 || int(o.Module) >= len(p.ElemRecompute) {
		return 0
	}
	return p.ElemRecompute[o.Module]
}
