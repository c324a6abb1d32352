<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Error</title></head>
<body>
<h1>Something went wrong</h1>
<p>The error has been logged.</p>
</body>
</html>
