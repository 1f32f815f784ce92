"""Host metrics the engine cannot report itself: neuron-monitor's Neuron device reports as EMF lines."""
