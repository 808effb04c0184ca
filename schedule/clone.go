package schedule

import "slices"

// Clone returns a deep copy of p: no slice of the copy shares its backing
// array with p, so either may be changed without the other seeing it
// (tests forge plans from a zoo plan this way; TestCloneIsDeep fails when
// a new slice field is not copied here).
func (p *Plan) Clone() *Plan {
	q := *p
	q.Cluster.PeakFLOPS = slices.Clone(p.Cluster.PeakFLOPS)
	q.Cluster.Profile = slices.Clone(p.Cluster.Profile)
	q.Groups = slices.Clone(p.Groups)
	for i := range q.Groups {
		g := &q.Groups[i]
		g.Modules = slices.Clone(g.Modules)
		g.Params = slices.Clone(g.Params)
		for j := range g.Params {
			g.Params[j].Shape = slices.Clone(g.Params[j].Shape)
			g.Params[j].Aliases = slices.Clone(g.Params[j].Aliases)
		}
	}
	q.Modules = slices.Clone(p.Modules)
	q.ElemRecompute = slices.Clone(p.ElemRecompute)
	q.Buffers = slices.Clone(p.Buffers)
	q.EventNames = slices.Clone(p.EventNames)
	q.Ops = slices.Clone(p.Ops)
	q.GEMMTable = slices.Clone(p.GEMMTable)
	q.UseTable = slices.Clone(p.UseTable)
	q.Warnings = slices.Clone(p.Warnings)
	q.Prediction.ExposedByGroup = slices.Clone(p.Prediction.ExposedByGroup)
	q.Prediction.PeakByPool = slices.Clone(p.Prediction.PeakByPool)
	return &q
}
