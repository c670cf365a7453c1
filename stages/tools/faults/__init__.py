"""`make reliability`: faults injected on purpose. Damaged run folders and a killed engine
(reliability.py), a hostile campaign (hostile*.py), and crash and disk faults on every stage that
writes (crash*.py, libfiu through crash_child.py)."""
