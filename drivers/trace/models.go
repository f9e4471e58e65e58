package trace

// Models are the published GPU cluster workloads a synthetic trace can follow (Generate), by
// name. Their numbers were read from the authors' own figures, produced from the full traces,
// at the plotted points (docs/your-cluster.md says how):
//
//   - job sizes: InternLM/AcmeTrace (commit 6d6ac9cd15f3) figure/cdf_job_gpunum.pdf, the
//     cumulative share of GPU jobs by GPUs requested, for Philly, Helios and others (Hu et al.,
//     "Characterization of Large Language Model Development in the Datacenter", NSDI '24);
//   - run times: the same repository's figure/cdf_job_duration_util.pdf (end minus start, so
//     without queueing), whose medians match its data/cluster_summary.csv (Helios 206 s,
//     Philly 874 s);
//   - Helios arrivals: S-Lab-System-Group/HeliosArtifact (commit bdaae109c21f) analysis/
//     2_cluster characterization/cluster_diurnal.pdf, the mean GPU jobs submitted per hour of
//     day over April to September 2020 in all four clusters (Hu et al., "Characterization and
//     Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters", SC '21);
//   - Philly's mean rate: msr-fiddle/philly-traces README, 117,325 jobs from 2017-08-07 to
//     2017-12-22 (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
//     Training Workloads", USENIX ATC '19); no hour-of-day pattern is published for it.
//
// No inter-arrival distribution is published for either: arrivals are a Poisson process whose
// hourly rate follows the measured pattern, the usual modelling choice, not a measurement.
var Models = map[string]Model{
	"helios": {
		Name: "helios",
		Source: "Helios (SenseTime, the 4 released clusters; Hu et al., SC '21): job sizes and run times " +
			"from InternLM/AcmeTrace@6d6ac9cd15f3 figure/cdf_job_gpunum.pdf and cdf_job_duration_util.pdf, " +
			"arrivals per hour of day from S-Lab-System-Group/HeliosArtifact@bdaae109c21f cluster_diurnal.pdf",
		// 17–32 GPUs counted as 32, 33–64 as 64, more than 64 as 128; odd sizes (0.2 %) are left out.
		Sizes: []Share{{1, 72.2}, {2, 2.5}, {4, 5.7}, {8, 14.0}, {16, 3.0}, {32, 1.7}, {64, 0.4}, {128, 0.3}},
		Durations: []Point{{1, 4.0}, {16, 10.7}, {32, 16.2}, {64, 24.9}, {128, 37.8}, {256, 56.6}, {512, 67.6},
			{1024, 75.2}, {2048, 84.1}, {4096, 87.5}, {8192, 90.8}, {16384, 94.4}, {32768, 96.3}, {65536, 97.8},
			{131072, 98.9}, {262144, 99.5}, {524288, 99.9}, {1048576, 100}},
		// Hours 0–23 (UTC+8, the clusters' local time).
		Hourly: [24]float64{329, 307, 248, 217, 205, 202, 199, 186, 203, 297, 409, 450,
			435, 445, 483, 519, 543, 484, 399, 436, 476, 445, 414, 398},
		PerDay: 8729,
	},
	"philly": {
		Name: "philly",
		Source: "Philly (Microsoft; Jeon et al., USENIX ATC '19): job sizes and run times from " +
			"InternLM/AcmeTrace@6d6ac9cd15f3 figure/cdf_job_gpunum.pdf and cdf_job_duration_util.pdf, " +
			"the mean rate from msr-fiddle/philly-traces' README (117,325 jobs in 138 days); no hour-of-day pattern is published",
		// 9–16 GPUs counted as 16, 17–32 as 32, more than 32 as 64.
		Sizes: []Share{{1, 82.42}, {2, 2.06}, {4, 7.57}, {8, 6.86}, {16, 0.89}, {32, 0.17}, {64, 0.02}},
		Durations: []Point{{1, 0}, {16, 3.6}, {32, 8.4}, {64, 18.9}, {128, 27.0}, {256, 31.5}, {512, 36.3},
			{1024, 54.9}, {2048, 67.5}, {4096, 79.3}, {8192, 84.6}, {16384, 90.3}, {32768, 92.7}, {65536, 94.9},
			{131072, 96.9}, {262144, 98.4}, {524288, 99.3}, {1048576, 99.8}, {4240676, 100}},
		Hourly: [24]float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		PerDay: 850,
	},
}
