"""AUTO-BENCH F4 routing: purchase requests → approve/review/reject (corpus generator, reference agent)."""
