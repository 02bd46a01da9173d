"""The canonical dataset on disk: layout and commits (`store`), the SQL views over it
(`views`), the closed-loop history files (`history`)."""
