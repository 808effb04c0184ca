// Package hardware holds what fsdpc knows of the hardware it plans for:
// the GPU and link presets (datasheet figures, SM counts, clocks, power
// limits), the device memory a training process holds outside PyTorch's
// allocator, and the cost model's constants (Calibration), with each
// chip's measured or fitted profile, the constants a hardware profile
// file may set (ProfileKeys) and the physical range of each, and the one
// matcher from a GPU's reported name to its preset (Recognize).
//
// It sits below ir in the dependency order and imports nothing of
// fsdpc's: ir reads the presets to build a model's cluster, schedule
// reads the calibration its cost formulas run on, and calibrate fits the
// constants within the ranges set here. Every figure cites its source
// where it is set.
package hardware
