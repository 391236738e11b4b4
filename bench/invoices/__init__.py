"""A four-field invoice extractor with a simulated reference: invoice text → ``{invoice_no, total,
currency, due_date}``, three fields regular and ``currency`` irregular on the invoices that only
say "dollars" (:mod:`bench.invoices.reference`). It shows a record compiling per field: ``python
-m bench.invoices`` (:mod:`bench.invoices.__main__`)."""
