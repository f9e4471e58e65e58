package drivers

import (
	"github.com/draforge/draforge/engine"
	"github.com/draforge/draforge/engine/machine"
)

// Names returns the action, observation and mapper names the real drivers register, without
// talking to a cluster: Register runs against informers over a nil client that are never
// started, and without the drivers' background loops (no work queue). Tools validating machine
// files offline (draforge machines vet, draforge serve) use it, so they accept exactly what the
// controller accepts.
func Names() (machine.Names, error) {
	reg := engine.NewRegistry()
	if _, err := register(reg, Deps{Informers: engine.NewInformers(nil)}); err != nil {
		return machine.Names{}, err
	}
	return reg.Names(), nil
}
