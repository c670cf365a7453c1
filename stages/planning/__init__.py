"""Planning a launch before it is made, shared by the stages that need it: the memory arithmetic
(capacity), the time (time), their inputs (inputs), the campaign's earlier launches (history) and
the plans made of them (plans). The run stage's scheduler checks a spec with it before a launch,
derive publishes every launch beside its plan, the plan stage prints and writes the specs' plans."""
