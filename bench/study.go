package bench

import (
	"fmt"
	"maps"
	"slices"
)

// Study is a whole bench: what ran, where, what was measured, and the
// model. It is what results.json holds.
type Study struct {
	// Command is the bench's command line, to make the study again.
	Command string `json:"command"`
	Date    string `json:"date"`
	Vmcore  string `json:"vmcore"`
	// BytesIn is the crashed machine's memory (pages with data × page size):
	// every throughput is this over wall seconds.
	BytesIn    int64  `json:"bytes_in"`
	UsableCPUs string `json:"usable_cpus"`
	// Host is the machine, Pagepipe the binary measured (its version and
	// SHA-256): set by the cores study, which runs where the code was not
	// built.
	Host         *Host     `json:"host,omitempty"`
	Pagepipe     string    `json:"pagepipe,omitempty"`
	Makedumpfile string    `json:"makedumpfile_version,omitempty"`
	Notes        []string  `json:"notes"`
	Machine      Machine   `json:"machine"`
	Runs         []Run     `json:"runs"`
	Summaries    []Summary `json:"summaries"`
	Checks       []Check   `json:"model_checks"`
	Curves       []Curve   `json:"model_curves"`
}

// Analyze summarizes the runs and fits the model.
func (s *Study) Analyze() error {
	s.Summaries = Summarize(s.Runs)
	var err error
	if s.Checks, err = Checks(s.Summaries, s.Machine); err != nil {
		return err
	}
	s.Curves, err = Curves(s.Summaries, s.Machine)
	return err
}

// group is the summaries that share everything but the program, the
// worker count and (for table 003) the CPUs.
type group struct {
	title string
	pp    map[int]Summary // by workers
	mdf   map[int]Summary
}

// sumKey is what a table's block shares.
type sumKey struct {
	cpus, mapSize, codec string
	level                int
}

// blocks groups the summaries for table 001: one block per CPU set,
// pagepipe map size, codec and level; makedumpfile's rows (no map size)
// join every block of their CPUs, codec and level.
func (s *Study) blocks() []group {
	var keys []sumKey
	seen := map[sumKey]bool{}
	for _, x := range s.Summaries {
		if x.Program != Pagepipe {
			continue
		}
		k := sumKey{x.CPUList(), x.MapSize(), x.Codec, x.Level}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	var out []group
	for _, k := range keys {
		g := group{
			title: fmt.Sprintf("%s -d %d, CPUs %s, map-size %s", codecFlag(k.codec), k.level, k.cpus, k.mapSize),
			pp:    map[int]Summary{}, mdf: map[int]Summary{},
		}
		for _, x := range s.Summaries {
			if x.CPUList() != k.cpus || x.Codec != k.codec || x.Level != k.level {
				continue
			}
			switch {
			case x.Program == Pagepipe && x.MapSize() == k.mapSize:
				g.pp[x.Workers] = x
			case x.Program == Makedumpfile:
				g.mdf[x.Workers] = x
			}
		}
		out = append(out, g)
	}
	return out
}

func sortedKeys(m map[int]Summary) []int { return slices.Sorted(maps.Keys(m)) }

// checkFor is the leave-one-out check of a pagepipe configuration.
func (s *Study) checkFor(x Summary) (Check, bool) {
	for _, c := range s.Checks {
		if c.Series == x.Series() && c.Workers == x.Workers {
			return c, true
		}
	}
	return Check{}, false
}
