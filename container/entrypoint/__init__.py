"""The production container's start: fetch weights and compiled Neuron artifacts, then exec Triton."""
