"""Log maintenance in the background: retention, compaction."""
