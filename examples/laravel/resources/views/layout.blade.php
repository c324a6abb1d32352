<!DOCTYPE html>
<html lang="{{ app()->getLocale() }}">
<head>
    <meta charset="utf-8">
    <title>@yield('title') - {{ config('app.name') }}</title>
</head>
<body>
<nav>
    <a href="{{ route('home') }}">Home</a>
    <a href="{{ route('guestbook') }}">Guestbook</a>
    @auth
        <a href="{{ route('account') }}">{{ auth()->user()->name }}</a>
        <form method="post" action="{{ route('logout') }}">
            @csrf
            <button>Log out</button>
        </form>
    @else
        <a href="{{ route('login') }}">Log in</a>
    @endauth
</nav>
@if (session('status'))
    <p class="status">{{ session('status') }}</p>
@endif
@yield('content')
</body>
</html>
