"""AUTO-BENCH F3 extraction: customer emails → typed records (corpus generator, reference agent)."""
