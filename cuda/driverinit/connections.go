package driverinit

import "os"

// connectionsVar is the driver's setting of how many hardware work queues
// a process's streams are spread over (CUDA C Programming Guide,
// "Environment Variables"): 8 by default, at most 32. Streams that share a
// queue behave as one where their work meets, so an independent copy can
// wait behind another stream's kernel. A rehearsal runs up to 8 virtual
// ranks in one process with 5 streams each: on an H200, llama3-8b's
// rehearsal took 519 ms a step (2.69× the prediction on the measured
// figures, with 320 ms of exposed communication) under the default and
// 200 ms (1.04×) with 32 (.ci/gpu-acceptance, rehearse-llama3-8b and
// rehearse-llama3-8b-conn32).
const connectionsVar = "CUDA_DEVICE_MAX_CONNECTIONS"

// maxConnections is what fsdpc-cuda asks for: the most the driver allows.
const maxConnections = "32"

// setConnections sets connectionsVar to maxConnections unless the
// environment already sets it (a user's choice stands), before the driver
// reads it, and returns the value in force.
func setConnections() string {
	if v, ok := os.LookupEnv(connectionsVar); ok {
		return v
	}
	os.Setenv(connectionsVar, maxConnections)
	return maxConnections
}
