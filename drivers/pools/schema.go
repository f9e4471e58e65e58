package pools

// Schema skew: the pool machine (machines/pool.cue) reads the installed SimulatedDevicePool CRD
// as a related object and compares its schema-version annotation with the version this
// release was built for. A CRD that predates the controller (Helm never upgrades CRDs) shows on
// every pool as Degraded=True SchemaPredatesController while Ready stays as it is; a current
// (or newer, additive) CRD shows Degraded=False SchemaCurrent. The constants below are the
// ones machines/pool.cue spells; a test keeps them equal.
const (
	// SchemaAnnotation carries the CRD's schema version, a decimal integer. A CRD without it is
	// version 0.
	SchemaAnnotation = "draforge.oaslananka/schema-version"
	// SchemaVersion is the CRD schema version this controller expects (deploy/crds carries it).
	SchemaVersion = 5

	ConditionDegraded    = "Degraded"
	ReasonSchemaPredates = "SchemaPredatesController"
	ReasonSchemaCurrent  = "SchemaCurrent"
)
